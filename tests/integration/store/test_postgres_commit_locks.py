"""Commits of two workers never wait on each other (migration 0015).

Worker A's commit updates a row of its shards and, in the same transaction, inserts
the links its page had; worker B's does the same on its shards. When A's page links to
B's row and B's to A's, an intake that waited for the row's updater deadlocked the two
(PostgreSQL aborted one; seen with two workers on one farm, and again on Citus, whose
intake had lost migration 15's NOT EXISTS: "deadlock detected" in the 2-worker Citus
crawl, CI of 2026-12-06). Here both transactions are held open by hand at the worst
moment and each intake must finish without waiting: the observer is the database's own
view of lock waits (pg_stat_activity; on Citus, where the wait happens on a worker node,
``citus_lock_waits`` of the coordinator).

Seen red on Citus with ``citus/intake.sql``'s read of the known keys taken out: "backend
… waits for a lock held by the other commit".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import asyncpg
import pytest

from courtier.core.clock import VirtualClock
from courtier.store.postgres import PostgresStore, _citus, _rows
from tests.integration.store.rows import T0, finished, url_row
from tests.pg import truncate

COMMIT = ("SELECT courtier_commit($1::courtier_commit[], $2::courtier_new_url[],"
          " $3::courtier_host_delta[], $4)")


#: a lock wait of the backend $1; on Citus, any lock wait in the cluster (the calls run
#: on the worker nodes' backends, which the coordinator's view lists by global pid)
WAITING = {
    "postgresql": "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1",
    "citus": "SELECT $1::integer > 0 AND EXISTS (SELECT 1 FROM citus_lock_waits)",
}


@pytest.fixture(params=sorted(WAITING))
def database(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(kind, DSN): the module's database on plain PostgreSQL, or on the Citus cluster."""
    fixture = "pg_module_dsn" if request.param == "postgresql" else "citus_module_dsn"
    return request.param, str(request.getfixturevalue(fixture))


async def finishes_without_waiting(observer: asyncpg.Connection, kind: str, pid: int,
                                   call: Awaitable[object]) -> object:
    """Await ``call`` (run on the backend ``pid``); fail if that backend (on Citus: any
    backend of the cluster) is ever seen waiting for a lock before the call returns."""
    task = asyncio.ensure_future(call)
    while not task.done():
        waiting = await observer.fetchval(WAITING[kind], pid)
        if waiting:
            task.cancel()
            raise AssertionError(f"backend {pid} waits for a lock held by the other commit")
        await asyncio.sleep(0.01)  # polling, not ordering: the outcome decides
    return task.result()


async def test_crossed_links_between_two_workers_commits_do_not_wait(
        database: tuple[str, str]) -> None:
    kind, dsn = database
    await truncate(dsn)
    store = PostgresStore(dsn, clock=VirtualClock(T0))
    await store.open()
    a_row = url_row("http://a.example/page")  # shards owned by worker A
    b_row = url_row("http://b.example/page")  # … and by worker B
    assert a_row.shard != b_row.shard
    try:
        await store.add_urls([a_row, b_row])
        leased = await store.load_due(sorted({a_row.shard, b_row.shard}), T0, 10, 10)
        assert {d.url_key for d in leased} == {a_row.url_key, b_row.url_key}
    finally:
        await store.close()
    # the sessions the store's pool opens (on Citus: its settings, _citus.SESSION_SETTINGS)
    settings = dict(_citus.SESSION_SETTINGS) if kind == "citus" else {}
    a, b, observer = [await asyncpg.connect(dsn, server_settings=settings) for _ in range(3)]
    try:
        a_tx, b_tx = a.transaction(), b.transaction()
        await a_tx.start()
        await b_tx.start()
        # each commits its own row first (row locks held until the transaction ends)
        await a.fetchval(COMMIT, _rows.commit_rows([finished(a_row)]), [], [], T0 + 2)
        await b.fetchval(COMMIT, _rows.commit_rows([finished(b_row)]), [], [], T0 + 2)
        # then each one's page links to the other's row, which is known already
        b_links_a = b.fetchval("SELECT courtier_add_urls($1::courtier_new_url[])",
                               _rows.new_url_rows([a_row]))
        assert await finishes_without_waiting(observer, kind, b.get_server_pid(), b_links_a) == 0
        a_links_b = a.fetchval("SELECT courtier_add_urls($1::courtier_new_url[])",
                               _rows.new_url_rows([b_row]))
        assert await finishes_without_waiting(observer, kind, a.get_server_pid(), a_links_b) == 0
        await a_tx.commit()
        await b_tx.commit()
        versions = dict(await observer.fetch("SELECT url_key, version FROM urls"))
        assert versions == {a_row.url_key: 1, b_row.url_key: 1}  # each commit applied once
    finally:
        for conn in (a, b, observer):
            await conn.close()
