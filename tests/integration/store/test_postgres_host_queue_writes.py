"""The commit writes a host's host_queue row only when the row changes (PostgreSQL
migration ``host_queue_writes_on_change``): the row is locked without a new version,
and recomputed from its levels only when the batch changed one of them.

Counted with ``pg_stat_xact_user_tables`` inside the commit's own transaction; the queue
is checked exact (against urls) after each commit.
"""

from __future__ import annotations

import dataclasses

import asyncpg
import pytest

from courtier.core.clock import VirtualClock
from courtier.store.base import FetchCommit
from courtier.store.postgres import PostgresStore, _rows
from tests.integration.store.rows import T0, finished, url_row
from tests.integration.store.test_postgres_store import _assert_host_queue_exact
from tests.pg import truncate

COMMIT = ("SELECT courtier_commit($1::courtier_commit[], $2::courtier_new_url[],"
          " $3::courtier_host_delta[], $4)")
WRITES = ("SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables"
          " WHERE relname IN ('host_queue', 'host_levels') ORDER BY relname")


async def _commit_counting(dsn: str, commits: list[FetchCommit],
                           now: float) -> dict[str, tuple[int, ...]]:
    """Commit ``commits`` in one transaction; the rows it wrote to the two tables."""
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            new = _rows.new_url_rows(u for c in commits for u in c.new_urls)
            applied = await conn.fetchval(COMMIT, _rows.commit_rows(commits), new, [], now)
            assert applied[0] == len(commits)
            rows = await conn.fetch(WRITES)
    finally:
        await conn.close()
    return {str(r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in rows}


async def test_a_commit_that_changes_no_level_writes_no_host_queue_row(
        pg_module_dsn: str) -> None:
    await truncate(pg_module_dsn)
    store = PostgresStore(pg_module_dsn, clock=VirtualClock(T0))
    await store.open()
    try:
        # three pages of one host, one level, the same due time: committing one of them
        # leaves the level's best due time (and so the host's queue row) as it was
        pages = [url_row(f"http://same.example/p{i}", due=T0 - 5) for i in range(3)]
        await store.add_urls(pages)
        read = await store.read_due(range(1024), T0, 10, 1)
        assert [d.url_key for d in read] and len(read) == 1
    finally:
        await store.close()
    first = next(p for p in pages if p.url_key == read[0].url_key)
    written = await _commit_counting(pg_module_dsn, [finished(first)], T0 + 1)
    assert written.get("host_queue", (0, 0, 0)) == (0, 0, 0)
    assert written.get("host_levels", (0, 0, 0)) == (0, 0, 0)
    await _assert_host_queue_exact(pg_module_dsn)

    # a link to a new host and one to this host at an earlier due time: the new host's
    # row is made (and then set from its level), this host's row rewritten once (its
    # level's due time moved)
    rest = [p for p in pages if p.url_key != first.url_key]
    links = [url_row("http://fresh.example/"), url_row("http://same.example/new", due=T0 - 50)]
    commit = dataclasses.replace(finished(rest[0]), new_urls=links)
    written = await _commit_counting(pg_module_dsn, [commit], T0 + 2)
    assert written["host_queue"] == (1, 2, 0)
    await _assert_host_queue_exact(pg_module_dsn)

    # the host's two pages still due: its level's best due time moves to the
    # refetch times, the host's row is rewritten once
    store = PostgresStore(pg_module_dsn, clock=VirtualClock(T0 + 3))
    await store.open()
    try:
        left = await store.read_due(range(1024), T0 + 3, 10, 5)
    finally:
        await store.close()
    by_key = {r.url_key: r for r in [*pages, *links]}
    same = [finished(by_key[d.url_key]) for d in left if d.host_key == first.host_key]
    assert len(same) == 2
    written = await _commit_counting(pg_module_dsn, same, T0 + 4)
    assert written["host_queue"] == (0, 1, 0)
    await _assert_host_queue_exact(pg_module_dsn)


async def test_the_commit_still_holds_the_host_queue_rows_it_does_not_rewrite(
        pg_module_dsn: str) -> None:
    await truncate(pg_module_dsn)
    store = PostgresStore(pg_module_dsn, clock=VirtualClock(T0))
    await store.open()
    try:
        pages = [url_row(f"http://held.example/p{i}", due=T0 - 5) for i in range(2)]
        await store.add_urls(pages)
        read = await store.read_due(range(1024), T0, 10, 1)
        assert len(read) == 1
        first = next(p for p in pages if p.url_key == read[0].url_key)
        committing, other = await asyncpg.connect(pg_module_dsn), await asyncpg.connect(
            pg_module_dsn)
        try:
            tx = committing.transaction()
            await tx.start()
            await committing.fetchval(COMMIT, _rows.commit_rows([finished(first)]), [], [],
                                      T0 + 1)
            assert await committing.fetchval(
                "SELECT n_tup_upd FROM pg_stat_xact_user_tables"
                " WHERE relname = 'host_queue'") == 0
            # the row the commit did not rewrite is locked until it ends: an intake of
            # the host (which writes the row) cannot slip between its read and its write
            with pytest.raises(asyncpg.exceptions.LockNotAvailableError):
                await other.execute(
                    "SELECT 1 FROM host_queue WHERE shard = $1 AND host_key = $2"
                    " FOR NO KEY UPDATE NOWAIT", first.shard, first.host_key)
            await tx.commit()
            assert await other.fetchval(
                "SELECT 1 FROM host_queue WHERE shard = $1 AND host_key = $2"
                " FOR NO KEY UPDATE NOWAIT", first.shard, first.host_key) == 1
        finally:
            await committing.close()
            await other.close()
    finally:
        await store.close()
    await _assert_host_queue_exact(pg_module_dsn)
