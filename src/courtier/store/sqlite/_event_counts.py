"""The SQLite side of the outbox tallies (``store/event_counts.py``, migration 0016).

The commit and the re-parse inserts call :func:`add_counts` in their own
transaction with the counter names of the events they inserted; when an insert
skipped rows it cannot name (``INSERT OR IGNORE`` of a batch), :func:`recount`
rebuilds the table from the events themselves, in the same transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

from courtier.store.event_counts import EventCounts

_ADD = (
    "INSERT INTO event_counts (name, n) VALUES (?, ?)"
    " ON CONFLICT (name) DO UPDATE SET n = n + excluded.n"
)
_OUTCOME = "COALESCE(json_extract(payload, '$.outcome'), 'None')"
_RECOUNT = (
    "DELETE FROM event_counts",
    "INSERT INTO event_counts (name, n)"
    " SELECT 'events', COUNT(*) FROM events WHERE EXISTS (SELECT 1 FROM events)",
    f"INSERT INTO event_counts (name, n) SELECT 'outcome:' || {_OUTCOME}, COUNT(*)"
    " FROM events GROUP BY 1",
    "INSERT INTO event_counts (name, n) SELECT 'status:' || CASE"
    " WHEN json_type(payload, '$.status') = 'integer' AND json_extract(payload, '$.status') > 0"
    " THEN (json_extract(payload, '$.status') / 100) || 'xx' ELSE 'error' END, COUNT(*)"
    f" FROM events WHERE {_OUTCOME} NOT IN ('robots_denied', 'blocked') GROUP BY 1",
)


def add_counts(conn: sqlite3.Connection, counts: Mapping[str, int]) -> None:
    """Add ``counts`` (name → events) to the stored counters."""
    rows = [(name, n) for name, n in counts.items() if n]
    if rows:
        conn.executemany(_ADD, rows)


def recount(conn: sqlite3.Connection) -> None:
    """Rebuild every counter from the stored events (one scan of the outbox)."""
    for statement in _RECOUNT:
        conn.execute(statement)


def read_counts(conn: sqlite3.Connection) -> EventCounts:
    rows = conn.execute("SELECT name, n FROM event_counts").fetchall()
    return EventCounts.from_counters((str(name), int(n)) for name, n in rows)
