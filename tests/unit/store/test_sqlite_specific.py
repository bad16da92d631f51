"""SQLite-only behaviour: migrations, PRAGMAs, error mapping, atomicity, threading."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import courtier.store.sqlite as sqlite_pkg
from courtier.core.clock import VirtualClock
from courtier.core.errors import StoreError
from courtier.core.outcome import Outcome
from courtier.store.base import FetchCommit, HostStatsDelta, NewUrl, ReparseEvent, UrlState
from courtier.store.sqlite import SqliteStore
from courtier.store.sqlite._schema import connect, load_migrations, migrate

T0 = 1_700_000_000.0
TABLES = {"urls", "hosts", "shards", "events", "payloads", "fetch_log", "schema_version"}


def key(url: str) -> bytes:
    return hashlib.blake2b(url.encode(), digest_size=16).digest()


def new(url: str, shard: int = 1) -> NewUrl:
    return NewUrl(key(url), url, url.split("/", 3)[2], shard, 0, 0, T0, T0)


def ok(url: str, version: int = 0, **extra: object) -> FetchCommit:
    fields: dict[str, object] = {
        "url_key": key(url),
        "url": url,
        "host_key": url.split("/", 3)[2],
        "shard": 1,
        "version": version,
        "epoch": 0,
        "outcome": Outcome.OK,
        "fetched_at": T0,
        "next_fetch_at": T0 + 60,
    }
    fields.update(extra)
    return FetchCommit(**fields)  # type: ignore[arg-type]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    s = SqliteStore(tmp_path / "crawl.sqlite", clock=VirtualClock(T0))
    await s.open()
    try:
        yield s
    finally:
        await s.close()


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def test_package_exports() -> None:
    assert sqlite_pkg.__all__ == ["SqliteStore"]


def test_migrations_are_numbered_from_one() -> None:
    steps = load_migrations()
    assert [m.version for m in steps] == list(range(1, len(steps) + 1))
    assert steps[0].name == "0001_initial.sql"


async def test_migrates_an_empty_file_and_reopen_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.touch()
    first = SqliteStore(path)
    await first.open()
    await first.add_urls([new("http://a.test/1")])
    await first.close()
    newest = load_migrations()[-1].version
    assert first.schema_version == newest
    second = SqliteStore(path)
    await second.open()
    await second.close()
    with raw(path) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_version")]
        urls = conn.execute("SELECT COUNT(*) FROM urls").fetchone()[0]
    assert names >= TABLES
    assert versions == list(range(1, newest + 1))
    assert urls == 1


async def test_upgrades_a_version_one_database(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    conn = connect(str(path))
    try:
        assert migrate(conn, load_migrations()[:1]) == 1
        conn.execute(
            "INSERT INTO urls (url_key, url, host_key, shard, discovered_at, next_fetch_at)"
            " VALUES (?, 'http://a.test/', 'a.test', 1, 1.0, 1.0)",
            (key("http://a.test/"),),
        )
    finally:
        conn.close()
    s = SqliteStore(path)
    await s.open()
    try:
        assert s.schema_version == load_migrations()[-1].version >= 2
        assert await s.seed_urls() == ["http://a.test/"]
    finally:
        await s.close()
    with raw(path) as check:
        indexes = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"urls_due", "urls_seeds"} <= indexes


async def test_pragmas_and_index(store: SqliteStore) -> None:
    def inspect(conn: sqlite3.Connection) -> tuple[str, int, int, int, str]:
        plan = " ".join(
            str(r[3])
            for r in conn.execute(
                "EXPLAIN QUERY PLAN SELECT url_key FROM urls"
                " WHERE shard IN (SELECT value FROM json_each('[1,2]'))"
                " AND state = 0 AND next_fetch_at <= 5"
            )
        )
        return (
            conn.execute("PRAGMA journal_mode").fetchone()[0],
            conn.execute("PRAGMA synchronous").fetchone()[0],
            conn.execute("PRAGMA foreign_keys").fetchone()[0],
            conn.execute("PRAGMA busy_timeout").fetchone()[0],
            plan,
        )

    mode, synchronous, foreign_keys, busy, plan = await store._call(inspect)
    assert (mode, synchronous, foreign_keys, busy) == ("wal", 1, 0, 5000)
    assert "urls_due" in plan


async def test_all_work_runs_on_one_worker_thread(store: SqliteStore) -> None:
    idents = await asyncio.gather(
        *(store._call(lambda _c: threading.get_ident()) for _ in range(20))
    )
    assert len(set(idents)) == 1
    assert idents[0] != threading.get_ident()


async def test_unwritable_path_raises_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    s = SqliteStore(blocker / "crawl.sqlite")
    with pytest.raises(StoreError, match=r"a-file.*open failed.*(writable|exists)"):
        await s.open()
    with pytest.raises(StoreError, match="not open"):
        await s.add_urls([new("http://a.test/1")])
    await s.close()


async def test_corrupt_file_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.sqlite"
    path.write_bytes(b"this is not sqlite" * 400)
    with pytest.raises(StoreError, match="not a courtier database"):
        await SqliteStore(path).open()


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite"
    s = SqliteStore(path)
    await s.open()
    await s.close()
    with raw(path) as conn:
        conn.execute("INSERT INTO schema_version VALUES (999, '0999_future.sql', 0)")
    with pytest.raises(StoreError, match="version 999"):
        await SqliteStore(path).open()


async def test_failed_commit_applies_nothing(store: SqliteStore, tmp_path: Path) -> None:
    await store.add_urls([new("http://a.test/1"), new("http://a.test/2")])
    await store.load_due([1], T0, 10, 10)
    with raw(tmp_path / "crawl.sqlite") as conn:
        conn.execute(
            "CREATE TRIGGER boom BEFORE INSERT ON fetch_log WHEN NEW.status = 500"
            " BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
        )
    batch = [ok("http://a.test/1", status=200, new_urls=[new("http://b.test/x")])]
    batch.append(ok("http://a.test/2", status=500))
    with pytest.raises(StoreError, match=r"commit failed.*injected failure"):
        await store.commit(batch)
    row = await store.get_url(key("http://a.test/1"))
    assert row is not None and row["version"] == 0 and row["state"] == UrlState.SCHEDULED
    assert await store.get_url(key("http://b.test/x")) is None
    assert await store.read_events(0, 10) == []
    assert (await store.commit(batch[:1])).applied == 1  # the store still works


async def test_full_database_raises_and_inserts_nothing(store: SqliteStore) -> None:
    await store.add_urls([new("http://a.test/seed")])
    pages = await store._call(lambda c: int(c.execute("PRAGMA page_count").fetchone()[0]))
    await store._call(lambda c: c.execute(f"PRAGMA max_page_count = {pages + 2}"))
    batch = [new(f"http://a.test/{'x' * 200}/{i}") for i in range(2000)]
    with pytest.raises(StoreError, match="full"):
        await store.add_urls(batch)
    assert (await store.counts())["urls"] == 1


async def test_reparse_batch_with_a_payload_that_is_not_json_adds_nothing(
    store: SqliteStore,
) -> None:
    good = ReparseEvent(key("http://a.test/"), 1, 1, {"links": []})
    bad = ReparseEvent(key("http://b.test/"), 1, 1, {"score": float("nan")})
    with pytest.raises(StoreError, match="not JSON-serialisable"):
        await store.add_reparse_events([good, bad])
    assert await store.read_events(0, 10) == []
    assert (await store.event_counts()).events == 0
    skipped = ReparseEvent(key("http://c.test/"), 1, 0, {"score": float("nan")})
    assert await store.add_reparse_events([skipped, good]) == 1  # parser version 0: skipped
    assert [e.payload for e in await store.read_events(0, 10)] == [{"links": []}]


async def test_fetch_log_row_per_applied_commit(store: SqliteStore, tmp_path: Path) -> None:
    await store.add_urls([new("http://a.test/1")])
    await store.load_due([1], T0, 10, 10)
    commit = ok("http://a.test/1", status=200, robots_digest="r", delay_applied=1.5)
    await store.commit([commit])
    await store.commit([commit])  # stale: no second audit row
    with raw(tmp_path / "crawl.sqlite") as conn:
        rows = conn.execute(
            "SELECT version, status, outcome, robots_digest, delay_applied FROM fetch_log"
        ).fetchall()
    assert rows == [(1, 200, "ok", "r", 1.5)]


async def test_validators_survive_a_not_modified_commit(store: SqliteStore) -> None:
    await store.add_urls([new("http://a.test/1")])
    await store.load_due([1], T0, 10, 10)
    await store.commit([ok("http://a.test/1", etag='"e1"', payload_digest="d1", title="T")])
    await store.load_due([1], T0 + 60, 10, 10)
    await store.commit([ok("http://a.test/1", version=1, outcome=Outcome.NOT_MODIFIED, status=304)])
    row = await store.get_url(key("http://a.test/1"))
    assert row is not None
    assert (row["etag"], row["payload_digest"], row["title"]) == ('"e1"', "d1", "T")
    assert (row["status"], row["outcome"], row["version"]) == (304, "not_modified", 2)


async def test_events_are_stamped_with_the_store_clock(tmp_path: Path) -> None:
    clock = VirtualClock(T0)
    s = SqliteStore(tmp_path / "c.sqlite", clock=clock)
    await s.open()
    try:
        await s.add_urls([new("http://a.test/1")])
        clock.advance(42)
        await s.commit([ok("http://a.test/1")])
        (event,) = await s.read_events(0, 10)
        assert event.created_at == T0 + 42
    finally:
        await s.close()


async def test_replayed_batch_does_not_count_host_stats_twice(store: SqliteStore) -> None:
    await store.add_urls([new("http://a.test/1")])
    await store.load_due([1], T0, 10, 10)
    delta = HostStatsDelta("a.test", 1, fetched=1, status_2xx=1)
    await store.commit([ok("http://a.test/1")], [delta])
    await store.commit([ok("http://a.test/1")], [delta])
    host = await store.load_host("a.test")
    assert host is not None and host.fetched == 1


def test_migration_0006_rederives_shards_from_the_host_digest(tmp_path: Path) -> None:
    from courtier.core.urls import canonicalize, shard_of

    path = str(tmp_path / "old.sqlite")
    steps = load_migrations()
    conn = connect(path)
    try:
        assert migrate(conn, [s for s in steps if s.version <= 5]) == 5
        c = canonicalize("http://old-layout.test/page")
        old_shard = (shard_of(c.host_key) + 1) % 1024  # anything but the new value
        conn.execute(
            "INSERT INTO urls (url_key, url, host_key, shard, depth, priority, state, version,"
            " discovered_at, next_fetch_at) VALUES (?, ?, ?, ?, 0, 0, 0, 0, 0, 0)",
            (c.url_key, c.url, c.host_key, old_shard),
        )
        conn.execute("INSERT INTO hosts (host_key, shard) VALUES (?, ?)", (c.host_key, old_shard))
        conn.execute("INSERT INTO shards (shard, owner, epoch, lease_expires_at)"
                     " VALUES (?, 'local', 7, 1e12)", (old_shard,))
        assert migrate(conn, steps) == len(steps)
        assert conn.execute("SELECT shard FROM urls").fetchone()[0] == c.shard
        assert conn.execute("SELECT shard FROM hosts").fetchone()[0] == c.shard
        owner, epoch = conn.execute("SELECT owner, epoch FROM shards").fetchone()
        # lease dropped, fencing epoch never goes back (0011 bumps free rows once more)
        assert owner is None and epoch == 8
    finally:
        conn.close()


async def test_migration_8_keeps_event_ids_and_the_cursor_of_consumers(tmp_path: Path) -> None:
    path = tmp_path / "v6.sqlite"
    conn = connect(str(path))
    try:
        assert migrate(conn, load_migrations()[:6]) == 6
        for n in (1, 2, 9):  # ids with a gap, as after deleted rows
            conn.execute("INSERT INTO events (id, url_key, version, created_at, payload)"
                         " VALUES (?, ?, 1, 1.0, '{\"n\": 1}')", (n, bytes([n]) * 16))
    finally:
        conn.close()
    from courtier.store.base import ReparseEvent

    s = SqliteStore(path)
    await s.open()
    try:
        assert [e.id for e in await s.read_events(0, 10)] == [1, 2, 9]
        assert await s.add_reparse_events([ReparseEvent(bytes([9]) * 16, 1, 1, {"r": 1})]) == 1
        assert [e.id for e in await s.read_events(2, 10)][-1] > 9  # ids keep growing
    finally:
        await s.close()


@pytest.mark.parametrize(("durability", "level"), [("normal", 1), ("full", 2)])
async def test_durability_sets_synchronous(tmp_path: Path, durability: str, level: int) -> None:
    store = SqliteStore(tmp_path / "d.sqlite", durability=durability)
    await store.open()
    try:
        assert await store._call(lambda c: c.execute("PRAGMA synchronous").fetchone()[0]) == level
    finally:
        await store.close()


def test_unknown_durability_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="durability"):
        SqliteStore(tmp_path / "d.sqlite", durability="sometimes")
