"""The server-keys migration on a store in the old layout, for both SQL stores.

The old code keyed shards and the url_key prefix on ``scheme://authority``
(:func:`old_url_key`, pinned below to the value the old code's own test pinned). A store
is written through the store API (URLs of one name over http, https and a port, fetch
commits with their events and fetch log, host records, queues, trap statistics, a saved
clock, a shard lease), then put in the old layout — every key and shard rewritten with
the old formula and the migration's ``schema_version`` row removed, which is exactly
what the old code had stored — and reopened: the migration must give back, row for row,
the keys and shards the new code writes, in every table, and drop the per-host clocks
and the leases.

Seen red on a scratch copy: with the ``events`` update removed from the SQLite migration,
``test_an_old_layout_store_is_rewritten_to_server_keys[sqlite]`` failed on "events keep
their URL" (the events still held the old keys); with the ``fetch_log`` update removed
from the PostgreSQL one, the [postgres] case failed on "fetch log".
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import xxhash

from courtier.core.clock import VirtualClock
from courtier.core.outcome import Outcome
from courtier.core.records import FetchCommit, HostRecord, NewUrl
from courtier.core.urls import canonicalize
from courtier.store.base import Store
from courtier.store.cluster import HostClock, TrapStats
from courtier.store.postgres import PostgresStore
from courtier.store.postgres._schema import load_migrations as pg_migrations
from courtier.store.sqlite import SqliteStore
from courtier.store.sqlite._schema import load_migrations as sqlite_migrations

T0 = 1_700_000_000.0
URLS = [f"{origin}/{path}" for origin in ("http://a.test", "https://a.test",
                                          "https://a.test:8443", "http://b.test",
                                          "https://www.b.test")
        for path in ("", "x", "y?q=1", "deep/page")]


def old_url_key(host_key: str, url: str) -> bytes:
    """The url_key the code before the server keys wrote."""
    return xxhash.xxh3_64_digest(host_key.encode())[:4] + xxhash.xxh3_128_digest(url.encode())[:12]


def old_shard(host_key: str) -> int:
    return xxhash.xxh3_64_intdigest(host_key.encode()) >> 54


def test_the_old_formula_is_the_old_code_s() -> None:
    # the value tests/unit/core/test_urls.py pinned before the change
    assert old_url_key("http://example.com", "http://example.com/").hex() == \
        "f146e00a42663426682770e605cd77c9"
    assert old_shard("http://example.com") == 965


def _migration_version(steps: list[Any]) -> int:
    (found,) = [step.version for step in steps if step.name.endswith("_server_keys.sql")]
    return found


_ADD_COLUMN = re.compile(r"ALTER TABLE (\w+) ADD COLUMN (\w+)", re.IGNORECASE)
_CREATE_INDEX = re.compile(r"^CREATE (?:UNIQUE )?INDEX (\w+)", re.IGNORECASE | re.MULTILINE)
_CREATE_TABLE = re.compile(r"^CREATE TABLE (?:IF NOT EXISTS )?(\w+)", re.IGNORECASE | re.MULTILINE)
_DROP_COLUMN = re.compile(r"ALTER TABLE (\w+) DROP COLUMN (\w+)", re.IGNORECASE)
#: how to add back a column a later step drops (its definition before the drop)
_DROPPED_COLUMNS = {("shards", "lease_expires_at"): "double precision NOT NULL DEFAULT 0"}


def _undo_later_steps(steps: list[Any]) -> list[str]:
    """Statements that take a store back from the newest schema to the one the
    server-keys migration ends with: the columns later steps add are dropped; their other
    statements must run again harmlessly (functions made with CREATE OR REPLACE, a
    rename that skips itself when done); the tables and indexes they create (at the start
    of a line) are dropped first (shard_positions: ``outbox_heads``, ``events_shard_pos``,
    which SQLite would not let a column drop go past); the columns they drop are added
back. With them and the schema_version
    rows from the server-keys step on deleted, reopening runs the server-keys migration
    and the later steps again, as on a store written by the old code."""
    undo: list[str] = []
    for step in steps:
        if step.version <= _migration_version(steps):
            continue
        code = "\n".join(line for line in step.sql.splitlines()
                         if not line.lstrip().startswith("--"))
        undo += [f"ALTER TABLE {table} DROP COLUMN {column}"
                 for table, column in _ADD_COLUMN.findall(code)]
        undo += [f"ALTER TABLE {table} ADD COLUMN {column} {_DROPPED_COLUMNS[table, column]}"
                 for table, column in _DROP_COLUMN.findall(code)]
        undo += [f"DROP INDEX IF EXISTS {name}" for name in _CREATE_INDEX.findall(code)]
        undo += [f"DROP TABLE IF EXISTS {name}" for name in _CREATE_TABLE.findall(code)]
    return list(reversed(undo))


async def _write(store: Store) -> None:
    """A small crawl's worth of state, through the store API (new layout)."""
    rows = [canonicalize(url) for url in URLS]
    await store.add_urls([NewUrl(c.url_key, c.url, c.host_key, c.shard, 0, 0, T0, T0)
                          for c in rows])
    twin = rows[2].url_key[:8].hex()  # near_dup_of: the first 8 bytes of a twin's key
    commits = [FetchCommit(url_key=c.url_key, url=c.url, host_key=c.host_key, shard=c.shard,
                           version=0, epoch=0, outcome=Outcome.OK, fetched_at=T0 + 1,
                           next_fetch_at=T0 + 3600, status=200,
                           near_dup_of=twin if c is rows[4] else None)
               for c in rows[::2]]
    await store.commit(commits)
    for host_key in sorted({c.host_key for c in rows}):
        await store.save_robots(HostRecord(host_key, canonicalize(host_key + "/").shard,
                                           robots_status=404, robots_fetched_at=T0))
    a = canonicalize("http://a.test/")
    await store.save_trap_stats([TrapStats(a.host_key, a.shard, b"stats")])  # type: ignore[attr-defined]
    await store.save_host_clocks([HostClock(a.host_key, a.shard, delay_in_force=1.0)])  # type: ignore[attr-defined]


TABLES = {  # table: (its key columns, a label for the failure message)
    "urls": ("url, url_key, shard, near_dup_of", "URL rows"),
    "events": ("version, url_key, payload", "events keep their URL"),
    "fetch_log": ("version, url_key", "fetch log"),
    "hosts": ("host_key, shard", "hosts"),
    "host_queue": ("host_key, shard", "host queue"),
    "host_levels": ("host_key, priority, shard", "host levels"),
    "trap_stats": ("host_key, shard", "trap statistics"),
}


class SqliteLayout:
    def __init__(self, path: Path) -> None:
        self.path = path

    def store(self) -> Store:
        return SqliteStore(self.path, clock=VirtualClock(T0))

    def snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        with sqlite3.connect(self.path) as conn:
            return {table: sorted(tuple(bytes(v) if isinstance(v, bytes) else v for v in r)
                                  for r in conn.execute(f"SELECT {cols} FROM {table}"))
                    for table, (cols, _) in TABLES.items()}

    def age(self) -> None:
        """Rewrite the store into the old layout (what the old code stored)."""
        conn = sqlite3.connect(self.path)
        conn.create_function("old_key", 2, lambda h, k: old_url_key(h, "")[:4] + k[4:])
        conn.create_function("old_shard", 1, old_shard)
        with conn:
            conn.execute("CREATE TEMP TABLE m AS SELECT url_key AS new, "
                         "old_key(host_key, url_key) AS old FROM urls")
            conn.execute("UPDATE events SET payload = replace(payload, lower(hex(url_key)),"
                         " (SELECT lower(hex(old)) FROM m WHERE new = events.url_key))")
            for table in ("events", "fetch_log"):
                conn.execute(f"UPDATE {table} SET url_key = (SELECT old FROM m WHERE new = "
                             f"{table}.url_key)")
            conn.execute("UPDATE urls SET near_dup_of = (SELECT lower(hex(substr(old, 1, 8)))"
                         " FROM m WHERE lower(hex(substr(new, 1, 8))) = urls.near_dup_of)"
                         " WHERE near_dup_of IS NOT NULL")
            conn.execute("UPDATE urls SET url_key = old_key(host_key, url_key), "
                         "shard = old_shard(host_key)")
            for table in ("hosts", "host_queue", "host_levels", "trap_stats", "host_clocks"):
                conn.execute(f"UPDATE {table} SET shard = old_shard(host_key)")
            for statement in _undo_later_steps(sqlite_migrations()):
                conn.execute(statement)
            conn.execute("UPDATE shards SET owner = 'old-worker', lease_expires_at = 1e12")
            conn.execute("DELETE FROM schema_version WHERE version >= ?",
                         (_migration_version(sqlite_migrations()),))
        conn.close()

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.path) as conn:
            return list(conn.execute(sql))


class PostgresLayout:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    def store(self) -> Store:
        return PostgresStore(self.dsn, clock=VirtualClock(T0), max_size=2)

    def _run(self, job: Any) -> Any:
        async def go() -> Any:
            conn = await asyncpg.connect(self.dsn)
            try:
                return await job(conn)
            finally:
                await conn.close()
        return asyncio.run(go())

    def snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        async def job(conn: asyncpg.Connection) -> dict[str, list[tuple[Any, ...]]]:
            return {table: sorted(tuple(bytes(v) if isinstance(v, bytes) else v for v in r)
                                  for r in await conn.fetch(f"SELECT {cols} FROM {table}"))
                    for table, (cols, _) in TABLES.items()}
        return self._run(job)  # type: ignore[no-any-return]

    def age(self) -> None:
        async def job(conn: asyncpg.Connection) -> None:
            async with conn.transaction():
                rows = await conn.fetch("SELECT shard, url_key, host_key FROM urls")
                for row in rows:
                    key, host_key = bytes(row["url_key"]), row["host_key"]
                    old = old_url_key(host_key, "")[:4] + key[4:]
                    await conn.execute(
                        "UPDATE events SET payload = replace(payload, $1, $2)"
                        " WHERE shard = $3 AND url_key = $4",
                        key.hex(), old.hex(), row["shard"], key)
                    await conn.execute("UPDATE urls SET near_dup_of = $1 WHERE near_dup_of = $2",
                                       old[:8].hex(), key[:8].hex())
                    for table in ("urls", "events", "fetch_log"):
                        await conn.execute(
                            f"UPDATE {table} SET url_key = $1, shard = $2"
                            " WHERE shard = $3 AND url_key = $4",
                            old, old_shard(host_key), row["shard"], key)
                for table in ("hosts", "host_queue", "host_levels", "trap_stats",
                              "host_clocks"):
                    for (host_key,) in await conn.fetch(f"SELECT host_key FROM {table}"):
                        await conn.execute(f"UPDATE {table} SET shard = $1 WHERE host_key = $2",
                                           old_shard(host_key), host_key)
                for statement in _undo_later_steps(pg_migrations()):
                    await conn.execute(statement)
                await conn.execute("UPDATE shards SET owner = 'old-worker',"
                                   " lease_expires_at = 1e12")
                await conn.execute("DELETE FROM schema_version WHERE version >= $1",
                                   _migration_version(pg_migrations()))
        self._run(job)

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        async def job(conn: asyncpg.Connection) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in await conn.fetch(sql)]
        return self._run(job)  # type: ignore[no-any-return]


@pytest.fixture(params=["sqlite", "postgres"])
def layout(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        yield SqliteLayout(tmp_path / "courtier.db")
        return
    from tests.pg import temporary_database

    with temporary_database("rekey") as dsn:
        yield PostgresLayout(dsn)


def _open_and(layout: Any, job: Any) -> Any:
    async def go() -> Any:
        store = layout.store()
        await store.open()
        try:
            return await job(store)
        finally:
            await store.close()
    return asyncio.run(go())


def test_an_old_layout_store_is_rewritten_to_server_keys(layout: Any) -> None:
    _open_and(layout, _write)
    written = layout.snapshot()
    assert len(written["urls"]) == len(URLS) and written["events"] and written["fetch_log"]
    assert written["host_queue"] and written["host_levels"] and written["trap_stats"]
    layout.age()
    aged = layout.snapshot()
    assert aged["urls"] != written["urls"]  # the old layout really differs
    assert {r[2] for r in aged["urls"]} != {r[2] for r in written["urls"]}

    async def reopened(store: Store) -> tuple[Any, ...]:
        a = canonicalize("https://a.test:8443/x")
        row = await store.get_url(a.url_key)
        due = await store.load_due([a.shard], T0 + 10, 100, 100)
        events = await store.read_events(0, 1000)
        return row, due, events

    row, due, events = _open_and(layout, reopened)
    migrated = layout.snapshot()
    for table, (_, label) in TABLES.items():
        assert migrated[table] == written[table], label
    assert row is not None and row["url"] == "https://a.test:8443/x"
    # every URL of a.test, whatever its scheme or port, is in one shard now
    assert {d.host_key for d in due} == {"http://a.test", "https://a.test",
                                         "https://a.test:8443"}
    new_keys = {canonicalize(url).url_key for url in URLS}
    assert events and {e.url_key for e in events} <= new_keys
    assert all(e.payload["url_key"] == e.url_key.hex() for e in events)
    assert [r[3] for r in migrated["urls"] if r[3] is not None] == [
        canonicalize(URLS[2]).url_key[:8].hex()]
    assert layout.fetch("SELECT count(*) FROM host_clocks") == [(0,)]
    assert layout.fetch("SELECT count(*) FROM shards WHERE owner IS NOT NULL") == [(0,)]
