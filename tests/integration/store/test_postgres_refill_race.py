"""A refill never leases a row that a commit made not due while the refill ran
(migration 0017).

A worker whose refill failed with an unknown outcome resets every SCHEDULED row of its
shards (``_recover_refill``), the rows of its fetches in flight included: they are
QUEUED and due again while their fetches go on, and its next refill may choose one.
``courtier_load_due`` chooses its rows in some statements (the host walk) and marks
them SCHEDULED in a last one, with a newer snapshot; a commit of the chosen row in
between (version 1, due in an hour, QUEUED) used to pass the marking, which checked
only ``state = 0``: the committed version was handed out, fetched again at once with
the validators of its first fetch, and a second final event (``not_modified``) followed
the first. Seen in the store-loss cluster test about one run in four.

Both interleavings are staged by hand with PostgreSQL's locks, and pg_stat_activity
says when the refill waits: the commit ending between the walk and the marking
statement, and the commit ending while the marking waits for the row it updated.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from courtier.core.clock import VirtualClock
from courtier.store.base import UrlState
from courtier.store.postgres import PostgresStore, _rows
from tests.integration.store.rows import T0, finished, url_row
from tests.pg import truncate

COMMIT = ("SELECT courtier_commit($1::courtier_commit[], $2::courtier_new_url[],"
          " $3::courtier_host_delta[], $4)")
LOAD_DUE = "SELECT * FROM courtier_load_due($1, $2, $3, $4, $5, $6)"
NOW = T0 + 2


async def waits_for_a_lock(observer: asyncpg.Connection, conn: asyncpg.Connection,
                           call: asyncio.Future[Any]) -> None:
    """Return once ``conn``'s backend waits for a lock (fail if ``call`` ends first)."""
    pid = conn.get_server_pid()
    while True:
        if call.done():
            raise AssertionError(f"ended without waiting for a lock: {call.result()!r}")
        if await observer.fetchval(
                "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid):
            return
        await asyncio.sleep(0.01)  # polling, not ordering: PostgreSQL says when it waits


async def _reset_while_in_flight(dsn: str) -> Any:
    """One due row, leased, then reset to QUEUED as if its fetch were still going on."""
    await truncate(dsn)
    store = PostgresStore(dsn, clock=VirtualClock(T0))
    await store.open()
    row = url_row("http://a.example/page", due=T0 - 10)
    try:
        await store.add_urls([row])
        leased = await store.load_due([row.shard], T0, 10, 10)
        assert [d.url_key for d in leased] == [row.url_key]  # its fetch starts
        assert await store.reset_scheduled([row.shard]) == 1  # refill outcome unknown
    finally:
        await store.close()
    return row


def _refill(conn: asyncpg.Connection, shard: int) -> asyncio.Future[Any]:
    return asyncio.ensure_future(conn.fetch(LOAD_DUE, [shard], NOW, NOW - 7 * 86400, 10, 10, []))


async def _after(observer: asyncpg.Connection, row: Any, due: list[Any]) -> None:
    assert [(r["url_key"], r["version"]) for r in due] == []  # not due for an hour
    stored = await observer.fetchrow(
        "SELECT state, version, next_fetch_at FROM urls WHERE url_key = $1", row.url_key)
    assert (stored["state"], stored["version"], stored["next_fetch_at"]) == (
        UrlState.QUEUED, 1, T0 + 3600)


async def test_a_commit_between_the_walk_and_the_marking_is_not_leased(
        pg_module_dsn: str) -> None:
    row = await _reset_while_in_flight(pg_module_dsn)
    conns = [await asyncpg.connect(pg_module_dsn) for _ in range(4)]
    committer, locker, refiller, observer = conns
    try:
        commit_tx, lock_tx = committer.transaction(), locker.transaction()
        await commit_tx.start()
        await committer.fetchval(COMMIT, _rows.commit_rows([finished(row)]), [], [], NOW)
        # a SHARE lock queued behind the open commit lets the refill read (its walk sees
        # the row due) and holds its marking statement, whose snapshot comes after
        await lock_tx.start()
        lock = asyncio.ensure_future(locker.execute("LOCK TABLE urls IN SHARE MODE"))
        await waits_for_a_lock(observer, locker, lock)
        refill = _refill(refiller, row.shard)
        await waits_for_a_lock(observer, refiller, refill)
        await commit_tx.commit()
        await lock
        await lock_tx.rollback()
        await _after(observer, row, await refill)
    finally:
        for conn in conns:
            await conn.close()


async def test_a_commit_the_marking_waits_for_is_not_leased(pg_module_dsn: str) -> None:
    row = await _reset_while_in_flight(pg_module_dsn)
    conns = [await asyncpg.connect(pg_module_dsn) for _ in range(3)]
    committer, refiller, observer = conns
    try:
        commit_tx = committer.transaction()
        await commit_tx.start()
        await committer.fetchval(COMMIT, _rows.commit_rows([finished(row)]), [], [], NOW)
        refill = _refill(refiller, row.shard)  # its marking waits for the commit's row lock
        await waits_for_a_lock(observer, refiller, refill)
        await commit_tx.commit()
        await _after(observer, row, await refill)
    finally:
        for conn in conns:
            await conn.close()
