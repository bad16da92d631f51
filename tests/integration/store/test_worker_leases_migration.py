"""The worker-lease migration (PostgreSQL 0034, SQLite 0026) on a store whose leases are
still each shard's own expiry: every live lease stays live, with its owner and epoch; an
expired one stays takeable (at epoch + 1, a takeover), and a released one free.

The store is opened (every migration), taken back to the schema before the migration
(the table dropped, the shard expiry column added back, the migration's
``schema_version`` row removed, on PostgreSQL with every later one's), given leases as
the old code stored them, and reopened.
Seen red with the migration's INSERT of the owners' leases removed on a scratch copy:
both cases failed on the live set (set() == {1, 2}: no lease left live). On PostgreSQL the
store is taken back past migration 0039 too (the lease in the ``workers`` row), so the
upgrade runs 0034 then 0039: seen red with 0039's copy of the ``worker_leases`` rows
removed on a scratch copy (set() == {1, 2} again)."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import asyncpg
import pytest

from courtier.core.clock import VirtualClock
from courtier.store.base import Store
from courtier.store.postgres import PostgresStore
from courtier.store.sqlite import SqliteStore

T0 = 1_700_000_000.0
#: shard, owner, epoch, live (else expired), last_owner: as the old code stored them
OLD_LEASES = [(1, "A", 3, True, "A"), (2, "A", 3, False, "A"), (3, "B", 5, False, "B"),
              (4, None, 2, False, "C")]
_BACK = ("DROP TABLE worker_leases",
         "ALTER TABLE shards ADD COLUMN lease_expires_at double precision NOT NULL DEFAULT 0")


async def _sqlite_age(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        for statement in _BACK:
            conn.execute(statement)
        conn.execute("DELETE FROM schema_version WHERE name LIKE '%worker_leases%'")
        assert conn.total_changes
        conn.executemany(
            "INSERT INTO shards (shard, owner, epoch, lease_expires_at, last_owner)"
            " VALUES (?, ?, ?, ?, ?)",
            [(s, o, e, T0 + 3600 if live else T0 - 1, last)
             for s, o, e, live, last in OLD_LEASES])


#: PostgreSQL 0039 first (the lease moved into the ``workers`` row): back to 0034's table;
#: 0038's table too, which the runner makes again (0035-0037 replace functions only)
_PG_BACK_0039 = ("DROP TABLE outbox_placed",
                 "DELETE FROM workers WHERE heartbeat_at IS NULL",
                 "ALTER TABLE workers DROP COLUMN lease_expires_at",
                 "ALTER TABLE workers ALTER COLUMN heartbeat_at SET NOT NULL",
                 "CREATE TABLE worker_leases (owner text PRIMARY KEY)")


async def _postgres_age(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        for statement in (*_PG_BACK_0039, *_BACK):
            await conn.execute(statement)
        # the migration's row and every later one's: the runner applies what is above the
        # highest version recorded (later migrations are made to run again)
        assert await conn.execute(
            "DELETE FROM schema_version WHERE version >= (SELECT version FROM schema_version"
            " WHERE name LIKE '%worker_leases%')") != "DELETE 0"
        await conn.executemany(
            "INSERT INTO shards (shard, owner, epoch, lease_expires_at, last_owner) VALUES"
            " ($1, $2, $3, CASE WHEN $4 THEN courtier_now() + 3600 ELSE 0 END, $5)",
            OLD_LEASES)
    finally:
        await conn.close()


@pytest.fixture(params=["sqlite", "postgres"])
def layout(request: pytest.FixtureRequest, tmp_path: Path
           ) -> Iterator[tuple[Callable[[], Store], Callable[[], Awaitable[None]]]]:
    if request.param == "sqlite":
        path = tmp_path / "courtier.db"
        yield (lambda: SqliteStore(path, clock=VirtualClock(T0))), (lambda: _sqlite_age(path))
        return
    from tests.pg import temporary_database

    with temporary_database("wlease") as dsn:
        yield (lambda: PostgresStore(dsn, clock=VirtualClock(T0), max_size=2),
               lambda: _postgres_age(dsn))


async def test_an_upgrade_keeps_live_leases_live(
        layout: tuple[Callable[[], Store], Callable[[], Awaitable[None]]]) -> None:
    make, age = layout
    store = make()
    await store.open()
    await store.close()
    await age()
    store = make()
    await store.open()
    try:
        view = await store.cluster_view()
        assert [(x.shard, x.owner, x.epoch) for x in view.leases] == [
            (s, o, e) for s, o, e, _, _ in OLD_LEASES]
        live = {x.shard for x in view.leases if x.expires_at > view.now}
        # A's lease is its latest shard's: shard 2 (expired alone) lives again with it
        assert live == {1, 2}
        taken = await store.acquire_shards("C", [1, 2, 3, 4], T0, 30)
        assert taken == {3: 6, 4: 2}, "live leases stay live"
        assert await store.acquire_shards("A", [1, 2], T0, 30) == {1: 3, 2: 3}
        assert (await store.cluster_view([])).handovers == {"graceful": 0, "takeover": 1}
    finally:
        await store.close()
