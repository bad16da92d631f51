"""The refill of PostgreSQL and SQLite resumes its walk after the last host it returned
(store/walk_place.py; PostgreSQL migration 0031, SQLite 0024) and still finds a host
that another process moved before that point.

Reader A reads two hosts, then two more holding the first (its walk resumes after the
fourth); another store B (another process) then adds a URL that makes a host A has not
read due before all of them, and a new host due earlier still, both in the part of the
walk A has done. A's next refill, holding the four, must return exactly the brute-force
answer: those two first, and nothing of the held host the other process changed too.
Only the host-queue stamps (set on an insert and on a move of the walk key) tell A's
walk about them. Seen red on both stores with the stamps not set (SQLite: the update trigger
never firing; PostgreSQL: no update stamping in courtier_queue_enter and
courtier_queue_from_levels): the refill returned only the host after the resume point;
and on both with the store's filter of skipped hosts in a resumed walk
taken out (the held host came back).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from courtier.core.clock import VirtualClock
from courtier.core.urls import SHARD_COUNT, canonicalize
from courtier.store.base import NewUrl, Store
from courtier.store.postgres import PostgresStore
from courtier.store.sqlite import SqliteStore

T0 = 1_700_000_000.0
SHARDS = list(range(SHARD_COUNT))


def _url(url: str, due: float) -> NewUrl:
    c = canonicalize(url)
    return NewUrl(c.url_key, c.url, c.host_key, c.shard, 1, 0, due, T0 - 7200)


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Stores over one database, each as another process would open it."""
    if request.param == "sqlite":
        yield lambda: SqliteStore(tmp_path / "crawl.sqlite", clock=VirtualClock(T0))
        return
    dsn: str = request.getfixturevalue("pg_dsn")
    yield lambda: PostgresStore(dsn, clock=VirtualClock(T0))


def test_refill_finds_a_host_moved_before_where_its_walk_resumes(
        open_store: Callable[[], Store]) -> None:
    async def run() -> None:
        reader, other = open_store(), open_store()
        await reader.open()
        await other.open()
        try:
            await reader.add_urls([_url(f"http://h{i}.test/a", T0 - 100 + i) for i in range(6)])
            first = await reader.read_due(SHARDS, T0, 2, 1)
            held = {d.host_key for d in first}
            second = await reader.read_due(SHARDS, T0, 2, 1, skip_hosts=held)
            held |= {d.host_key for d in second}
            assert [d.url for d in first + second] == [
                f"http://h{i}.test/a" for i in range(4)]
            # another process: h5 gets a URL due before every host read so far, a new
            # host arrives due earlier still, and a host the reader holds gets one too
            await other.add_urls([_url("http://h5.test/b", T0 - 300),
                                  _url("http://new.test/a", T0 - 400),
                                  _url("http://h0.test/c", T0 - 500)])
            third = await reader.read_due(SHARDS, T0, 10, 1, skip_hosts=held)
            assert [d.url for d in third] == [
                "http://new.test/a", "http://h5.test/b", "http://h4.test/a"]
        finally:
            await other.close()
            await reader.close()

    asyncio.run(run())


def test_postgres_stamps_a_host_only_when_its_walk_key_moves(pg_dsn: str) -> None:
    """Migration 0031 stamps ``host_queue.moved_by`` on an insert and on a move of the
    walk key (next_due_at, best_priority) only, so a write that changes only a host's
    levels keeps the stamp, and with it a HOT update (an indexed column left alone).
    Seen red with courtier_queue_enter stamping every update it makes (the new lower
    level's write changed the stamp)."""
    def c(url: str, priority: int, due: float) -> NewUrl:
        u = canonicalize(url)
        return NewUrl(u.url_key, u.url, u.host_key, u.shard, 1, priority, due, T0 - 7200)

    async def run() -> None:
        store = PostgresStore(pg_dsn, clock=VirtualClock(T0))
        await store.open()
        host = canonicalize("http://h.test/").host_key

        async def row() -> tuple[int, list[int], float]:
            async def job(conn: Any) -> tuple[int, list[int], float]:
                r = await conn.fetchrow(
                    "SELECT moved_by::text::bigint AS m, level_priorities, next_due_at"
                    " FROM host_queue WHERE host_key = $1", host)
                return int(r["m"]), list(r["level_priorities"]), float(r["next_due_at"])
            return await store._run("check", job, write=False)

        try:
            await store.add_urls([c("http://h.test/a", 5, T0 - 100)])
            inserted = await row()
            assert inserted[0] > 0
            await store.add_urls([c("http://h.test/b", 2, T0 - 50)])  # a new, lower level
            levels_only = await row()
            assert levels_only[1] == [5, 2] and levels_only[2] == T0 - 100
            assert levels_only[0] == inserted[0]
            await store.add_urls([c("http://h.test/c", 5, T0 - 200)])  # due earlier: moves
            moved = await row()
            assert moved[2] == T0 - 200 and moved[0] > inserted[0]
        finally:
            await store.close()

    asyncio.run(run())
