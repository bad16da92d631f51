"""On Citus the commit and the intake take their locks one Citus shard at a time, in Citus
shard order.

``courtier_commit_routed`` (``citus/commit.sql``) commits a batch one Citus shard of
``urls`` after another, in Citus shard order, a batch over several worker nodes too, and
the intake (``courtier_add_urls``, ``citus/intake.sql``) enters its batch the same way:
every lock either takes in a Citus shard (rows, new keys, host-queue rows, heads,
tallies) is taken before any in a higher one. So two of them cannot wait for each other
in a cycle: while one waits in a Citus shard it holds nothing in a higher one.

The observer is Citus's view of lock waits across the cluster (``citus_lock_waits`` of
the coordinator, by each transaction's global pid). Each test holds a transaction open
at the point where a cycle would close and asks whether the other one waits for it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import asyncpg
import pytest

from courtier.store.base import NewUrl
from courtier.store.postgres import PostgresStore, _citus, _event_counts, _rows
from tests.integration.store.rows import T0, finished, url_row

ROUTED = ("SELECT courtier_commit_routed($1::courtier_commit[], $2::courtier_new_url[],"
          " $3::courtier_host_delta[], $4, $5::integer[], $6::bytea[], $7::integer[],"
          " $8::text[])")
ADD = "SELECT courtier_add_urls($1::courtier_new_url[])"
#: whether the transaction of the global pid $1 waits for a lock of the one of $2 (any
#: transaction when $2 is 0), anywhere in the cluster
WAITS = ("SELECT EXISTS (SELECT 1 FROM citus_lock_waits WHERE waiting_gpid = $1"
         " AND $2::bigint IN (0, blocking_gpid))")


@pytest.fixture
async def sessions(citus_module_dsn: str) -> AsyncIterator[list[asyncpg.Connection]]:
    """Four sessions as the store opens them (_citus.SESSION_SETTINGS)."""
    conns = [await asyncpg.connect(citus_module_dsn,
                                   server_settings=dict(_citus.SESSION_SETTINGS))
             for _ in range(4)]
    try:
        yield conns
    finally:
        for conn in conns:
            conn.terminate()  # a failed test may leave a call running on one


async def _citus_shards(conn: asyncpg.Connection,
                        rows: list[NewUrl]) -> dict[int, tuple[int, int]]:
    """Each row's shard: (its Citus shard of urls, the worker group holding it)."""
    return {r[0]: (r[1], r[2]) for r in await conn.fetch(
        "SELECT s, c, p.groupid FROM unnest($1::integer[]) AS s,"
        " get_shard_id_for_distribution_column('urls', s) AS c"
        " JOIN pg_dist_placement p ON p.shardid = c", [r.shard for r in rows])}


async def _gpid(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT citus_backend_gpid()"))


async def _until_waiting(observer: asyncpg.Connection, gpid: int,
                         task: asyncio.Future[object]) -> None:
    """Poll until the transaction ``gpid`` waits for a lock (``task`` must not end first)."""
    while not await observer.fetchval(WAITS, gpid, 0):  # polling: the lock decides
        assert not task.done(), f"ended without waiting: {task.result()}"
        await asyncio.sleep(0.01)


async def _without_waiting_for(observer: asyncpg.Connection, gpid: int, other: int,
                               task: asyncio.Future[object], message: str) -> object:
    """Await ``task`` (run by ``gpid``); fail if it is ever seen waiting for ``other``."""
    while not task.done():
        if await observer.fetchval(WAITS, gpid, other):
            task.cancel()
            raise AssertionError(message)
        await asyncio.sleep(0.01)  # polling, not ordering: the outcome decides
    return task.result()


async def _commit_call(conn: asyncpg.Connection, page: NewUrl, epoch: int,
                       links: list[NewUrl]) -> asyncio.Future[object]:
    """``page`` committed with ``links`` (the store's Citus call), in ``conn``'s open
    transaction, started as a task."""
    fetched = dataclasses.replace(finished(page, epoch), new_urls=links)
    return asyncio.ensure_future(conn.fetchval(
        ROUTED, _rows.commit_rows([fetched]), _rows.new_url_rows(links), [], T0 + 2,
        *_event_counts.written_names([fetched])))


async def test_a_commit_over_two_nodes_locks_one_citus_shard_after_another(
        citus_store: PostgresStore, sessions: list[asyncpg.Connection]) -> None:
    """A transaction holds a new link key of the lower of two Citus shards (on different
    worker nodes); the commit, whose links are that key and a new key of the higher
    Citus shard, waits for it; the holder then inserts the higher key, as a second
    commit would next, and must not wait for the commit.

    Seen red with the loop of ``courtier_commit_routed`` in descending Citus shard order
    (``ORDER BY m.c DESC``): "the holder waits for the commit"."""
    commit, holder, _, observer = sessions
    links = [url_row(f"http://l{i}.example/new") for i in range(64)]
    placed = await _citus_shards(observer, links)
    low = min(links, key=lambda r: placed[r.shard][0])
    high = max((r for r in links if placed[r.shard][1] != placed[low.shard][1]),
               key=lambda r: placed[r.shard][0])  # a higher Citus shard, the other node
    page = url_row("http://own.example/page")
    assert await citus_store.add_urls([page]) == 1
    epochs = await citus_store.acquire_shards("w1", [page.shard], T0, 30)
    await holder.execute("BEGIN")
    await commit.execute("BEGIN")
    assert await holder.fetchval(ADD, _rows.new_url_rows([low])) == 1  # held
    gpid = {c: await _gpid(c) for c in (commit, holder)}
    routed = await _commit_call(commit, page, epochs[page.shard], [low, high])
    await _until_waiting(observer, gpid[commit], routed)
    # the holder goes on to the higher Citus shard, as a second commit would
    second = asyncio.ensure_future(holder.fetchval(ADD, _rows.new_url_rows([high])))
    assert await _without_waiting_for(observer, gpid[holder], 0, second,
                                      "the holder waits for the commit") == 1
    await holder.execute("COMMIT")
    assert list(await routed) == [1, 0, 0]  # applied; both links known by then
    await commit.execute("COMMIT")
    assert await observer.fetchval("SELECT count(*) FROM urls WHERE url_key = ANY($1)",
                                   [low.url_key, high.url_key]) == 2
    assert (await citus_store.get_url(page.url_key) or {}).get("version") == 1


async def test_an_intake_and_a_commit_take_citus_shards_in_one_order(
        citus_store: PostgresStore, sessions: list[asyncpg.Connection]) -> None:
    """The commit of a page of a lower Citus shard holds the page's host-queue row, and
    waits (for a held key) among its links in a higher Citus shard; an intake of a new
    URL of the page's host and of one of those links waits for the host-queue row. The
    holder lets go: the commit must finish without waiting for the intake, which then
    finds the link known.

    Seen red with main's ``citus/intake.sql`` (the batch's new keys inserted in every
    Citus shard, then its host-queue rows): "the commit waits for the intake" (a
    deadlock, which Citus's detection would have broken by aborting one)."""
    commit, holder, intake, observer = sessions
    hosts = [url_row(f"http://q{i}.example/") for i in range(64)]
    placed = await _citus_shards(observer, hosts)
    first = min(hosts, key=lambda r: placed[r.shard][0])
    last = max(hosts, key=lambda r: placed[r.shard][0])
    page, sibling = (url_row(f"{first.url}{p}") for p in ("page", "new"))
    assert page.shard == sibling.shard
    # two new links of the higher Citus shard, in the order the commit inserts them
    held, link = sorted((url_row(f"{last.url}{p}") for p in ("a", "b")),
                        key=lambda r: (r.shard, r.url_key))
    assert await citus_store.add_urls([page]) == 1
    epochs = await citus_store.acquire_shards("w1", [page.shard], T0, 30)
    await holder.execute("BEGIN")
    await commit.execute("BEGIN")
    assert await holder.fetchval(ADD, _rows.new_url_rows([held])) == 1
    gpid = {c: await _gpid(c) for c in (commit, holder, intake)}
    routed = await _commit_call(commit, page, epochs[page.shard], [held, link])
    await _until_waiting(observer, gpid[commit], routed)  # the page's host queue row held
    added = asyncio.ensure_future(intake.fetchval(ADD, _rows.new_url_rows([sibling, link])))
    await _until_waiting(observer, gpid[intake], added)  # for the page's host queue row
    await holder.execute("ROLLBACK")
    assert list(await _without_waiting_for(
        observer, gpid[commit], gpid[intake], routed,
        "the commit waits for the intake")) == [1, 0, 2]
    await commit.execute("COMMIT")
    assert await added == 1  # the sibling; the link was the commit's
    assert await observer.fetchval("SELECT count(*) FROM urls WHERE url_key = ANY($1)",
                                   [held.url_key, link.url_key, sibling.url_key]) == 3
