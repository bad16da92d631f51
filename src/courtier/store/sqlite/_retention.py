"""SQLite side of the outbox and audit-log retention (migration outbox_retention): plain DELETEs of
a bounded prefix of ids, each in the store's one write transaction.

Event ids are handed out in commit order (one writer at a time), so "every id up to
X" is a prefix and ``pruned_through`` (the highest id removed) tells a reader exactly
whether it missed something. The audit log keeps its newest row, so a later row can
never be given an id that was handed out before (``INTEGER PRIMARY KEY`` takes the
highest id + 1).
"""

from __future__ import annotations

import sqlite3

from courtier.core.errors import EventsPruned
from courtier.store.consumer_floors import floors, floors_json
from courtier.store.sqlite import _shard_consumers
from courtier.store.sqlite._outbox_heads import mark_pruned

__all__ = ["check_readable", "prune_audit", "prune_events", "pruned_through"]


def pruned_through(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT pruned_through FROM outbox_retention").fetchone()
    return int(row[0]) if row is not None else 0


def check_readable(conn: sqlite3.Connection, after: int) -> None:
    """Raise :class:`EventsPruned` when events after ``after`` were removed."""
    through = pruned_through(conn)
    if after < through:
        raise EventsPruned(after, through)


def prune_events(conn: sqlite3.Connection, before: float, limit: int) -> int:
    """Remove the longest prefix (at most ``limit`` ids) of events created before
    ``before``, at or below every registered consumer's position and read in their
    shards by every per-shard consumer (``store/consumer_floors.py``)."""
    through = pruned_through(conn)
    lowest = conn.execute("SELECT MIN(position) FROM consumer_cursors").fetchone()[0]
    cap = 2**63 - 1 if lowest is None else int(lowest)
    # the floors (?3, JSON; NULL: no per-shard consumer) parsed once into a table
    window = conn.execute(
        "WITH f(shard, pos) AS MATERIALIZED"
        " (SELECT CAST(key AS INTEGER), value FROM json_each(?3))"
        " SELECT MAX(w.id), MIN(CASE WHEN w.created_at >= ?1 OR w.id > ?2 OR"
        " (?3 IS NOT NULL AND w.shard_pos > coalesce(f.pos, 0)) THEN w.id END)"
        " FROM (SELECT id, created_at, shard, shard_pos FROM events WHERE id > ?4"
        " ORDER BY id LIMIT ?5) AS w LEFT JOIN f ON f.shard = w.shard",
        (before, cap, floors_json(floors(_shard_consumers.all_cursors(conn).values())),
         through, max(0, limit))).fetchone()
    last, blocked = window
    if last is None:
        return 0
    upto = int(last) if blocked is None else int(blocked) - 1
    if upto <= through:
        return 0
    mark_pruned(conn, through, upto)
    removed = conn.execute("DELETE FROM events WHERE id > ? AND id <= ?",
                           (through, upto)).rowcount
    conn.execute("UPDATE outbox_retention SET pruned_through = ?", (upto,))
    return int(removed)


def prune_audit(conn: sqlite3.Connection, before: float, limit: int) -> int:
    """Remove the longest prefix (at most ``limit`` rows) of audit rows fetched before
    ``before``, never the newest row."""
    window = conn.execute(
        "SELECT MAX(id), MIN(CASE WHEN fetched_at >= ? THEN id END)"
        " FROM (SELECT id, fetched_at FROM fetch_log ORDER BY id LIMIT ?)",
        (before, max(0, limit))).fetchone()
    last, blocked = window
    if last is None:
        return 0
    newest = int(conn.execute("SELECT MAX(id) FROM fetch_log").fetchone()[0])
    upto = min(int(last) if blocked is None else int(blocked) - 1, newest - 1)
    return int(conn.execute("DELETE FROM fetch_log WHERE id <= ?", (upto,)).rowcount)
