"""SQLite's outbox counters (``store/sqlite/_event_counts.py``, migration 0016): the
migration counts the events already stored, a commit whose event insert skipped a row
recounts instead of double counting, and ``recount`` rebuilds tampered counters."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from courtier.core.clock import VirtualClock
from courtier.store.event_counts import EventCounts
from courtier.store.sqlite import SqliteStore
from courtier.store.sqlite._event_counts import read_counts, recount
from courtier.store.sqlite._schema import connect, load_migrations, migrate
from tests.unit.store.test_sqlite_specific import T0, key, new, ok

PAYLOADS = [
    {"outcome": "ok", "status": 200},
    {"outcome": "ok", "status": 204},
    {"outcome": "redirect", "status": 302},
    {"outcome": "gone", "status": 410},
    {"outcome": "retry", "status": 599},
    {"outcome": "retry", "status": None},
    {"outcome": "retry"},
    {"outcome": "robots_denied", "status": None},
    {"outcome": "blocked"},
    {"status": 200},  # a re-parse event may carry no outcome
    {"outcome": "http_error", "status": 0},
    {"outcome": "ok", "status": 200.0},  # not an int: Python counts it as "error"
]


def insert_events(conn: sqlite3.Connection) -> None:
    for n, payload in enumerate(PAYLOADS):
        conn.execute(
            "INSERT INTO events (url_key, version, created_at, payload) VALUES (?, 1, 1.0, ?)",
            (key(f"http://a.test/{n}"), json.dumps(payload)))


def test_migration_counts_the_events_already_stored(tmp_path: Path) -> None:
    conn = connect(str(tmp_path / "old.sqlite"))
    try:
        migrate(conn, [m for m in load_migrations() if m.version < 16])
        insert_events(conn)
        migrate(conn)
        counted = read_counts(conn)
    finally:
        conn.close()
    assert counted == EventCounts.of_payloads(PAYLOADS)
    assert counted.events == len(PAYLOADS)
    assert counted.status_mix == {"2xx": 3, "3xx": 1, "4xx": 1, "5xx": 1, "error": 4}
    assert counted.outcomes["None"] == 1


def test_recount_rebuilds_tampered_counters(tmp_path: Path) -> None:
    conn = connect(str(tmp_path / "c.sqlite"))
    try:
        migrate(conn)
        insert_events(conn)  # no counts added: the counters are now wrong
        conn.execute("INSERT INTO event_counts (name, n) VALUES ('outcome:bogus', 5)")
        assert read_counts(conn) != EventCounts.of_payloads(PAYLOADS)
        recount(conn)
        assert read_counts(conn) == EventCounts.of_payloads(PAYLOADS)
    finally:
        conn.close()


async def test_commit_whose_event_is_already_there_counts_it_once(tmp_path: Path) -> None:
    path = tmp_path / "dup.sqlite"
    store = SqliteStore(path, clock=VirtualClock(T0))
    await store.open()
    try:
        await store.add_urls([new("http://a.test/p"), new("http://a.test/q")])
        await store.load_due([1], T0, 10, 10)
        conn = sqlite3.connect(path, isolation_level=None)
        try:  # the fetch event of version 1 of /p exists before its commit
            conn.execute("INSERT INTO events (url_key, version, created_at, payload)"
                         " VALUES (?, 1, 1.0, '{\"outcome\":\"gone\",\"status\":404}')",
                         (key("http://a.test/p"),))
        finally:
            conn.close()
        result = await store.commit([ok("http://a.test/p"), ok("http://a.test/q")])
        assert result.applied == 2
        counted = await store.event_counts()
        events = await store.read_events(0, 100)
    finally:
        await store.close()
    assert len(events) == 2
    assert counted == EventCounts.of_payloads(e.payload for e in events)
    assert counted.outcomes == {"gone": 1, "ok": 1}
