"""SQLite side of the outbox and audit-log retention (migration outbox_retention): plain DELETEs of
a bounded prefix of ids, each in the store's one write transaction.

Event ids are handed out in commit order (one writer at a time), so "every id up to
X" is a prefix and ``pruned_through`` (the highest id removed) tells a reader exactly
whether it missed something. With no crawl-wide consumer registered the prefix is per
shard (:func:`_prune_by_shard`): an event a per-shard consumer holds in one shard holds
back no other shard's, and ``pruned_through`` still refuses every reader below an id
removed. The audit log keeps its newest row, so a later row can
never be given an id that was handed out before (``INTEGER PRIMARY KEY`` takes the
highest id + 1).
"""

from __future__ import annotations

import json
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
    if lowest is None:
        return _prune_by_shard(conn, before, limit, through)
    cap = int(lowest)
    # the floors (?3, JSON; NULL: no per-shard consumer) parsed once into a table; the
    # window starts at the oldest event kept (a prune by shard may have kept events
    # below pruned_through)
    window = conn.execute(
        "WITH f(shard, pos) AS MATERIALIZED"
        " (SELECT CAST(key AS INTEGER), value FROM json_each(?3))"
        " SELECT MIN(w.id), MAX(w.id), MIN(CASE WHEN w.created_at >= ?1 OR w.id > ?2 OR"
        " (?3 IS NOT NULL AND w.shard_pos > coalesce(f.pos, 0)) THEN w.id END)"
        " FROM (SELECT id, created_at, shard, shard_pos FROM events"
        " ORDER BY id LIMIT ?4) AS w LEFT JOIN f ON f.shard = w.shard",
        (before, cap, floors_json(floors(_shard_consumers.all_cursors(conn).values())),
         max(0, limit))).fetchone()
    first, last, blocked = window
    if last is None:
        return 0
    upto = int(last) if blocked is None else int(blocked) - 1
    if upto < int(first):
        return 0
    mark_pruned(conn, 0, upto)
    removed = conn.execute("DELETE FROM events WHERE id <= ?", (upto,)).rowcount
    conn.execute("UPDATE outbox_retention SET pruned_through = ?", (max(through, upto),))
    return int(removed)


def _prune_by_shard(conn: sqlite3.Connection, before: float, limit: int,
                    through: int) -> int:
    """No crawl-wide consumer: at most ``limit`` of the oldest events created before
    ``before`` that every per-shard consumer has read, an event held in one shard holding
    no other shard's (in each shard a prefix of its positions goes: the floor and the
    clock rise with them). ``pruned_through`` becomes the highest id removed: a
    ``read_events`` reader below it is refused."""
    rows = conn.execute(
        "WITH f(shard, pos) AS MATERIALIZED"
        " (SELECT CAST(key AS INTEGER), value FROM json_each(?2))"
        " SELECT w.id, w.shard, w.shard_pos FROM events w LEFT JOIN f ON f.shard = w.shard"
        " WHERE w.created_at < ?1 AND (?2 IS NULL OR w.shard_pos <= coalesce(f.pos, 0))"
        " ORDER BY w.id LIMIT ?3",
        (before, floors_json(floors(_shard_consumers.all_cursors(conn).values())),
         max(0, limit))).fetchall()
    if not rows:
        return 0
    tops: dict[int, int] = {}
    for _, shard, position in rows:
        tops[shard] = max(tops.get(shard, 0), position)
    conn.executemany("UPDATE outbox_heads SET pruned_pos = max(pruned_pos, ?) WHERE shard = ?",
                     [(top, shard) for shard, top in tops.items()])
    removed = conn.execute("DELETE FROM events WHERE id IN (SELECT value FROM json_each(?))",
                           (json.dumps([r[0] for r in rows]),)).rowcount
    conn.execute("UPDATE outbox_retention SET pruned_through = ?",
                 (max(through, max(r[0] for r in rows)),))
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
