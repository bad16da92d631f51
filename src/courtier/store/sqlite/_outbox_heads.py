"""SQLite's per-shard event positions (migration ``shard_positions``): the writers take
them (:func:`take_positions`, in the writing transaction; SQLite has one writer at a time,
so each shard's positions follow commit order) and ``read_events_by_shard`` reads by them
(:func:`read_page`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from courtier.core.records import Event
from courtier.core.shard_cursor import ShardCursor, ShardPage
from courtier.store.shard_reads import advance, check_unpruned, plan_reads

__all__ = ["cursor_at", "mark_pruned", "read_page", "take_positions"]


def take_positions(conn: sqlite3.Connection, shards: Sequence[int]) -> list[int]:
    """The next position of its shard for each event of ``shards`` (one entry an event,
    in insert order); the shards' heads move past them. A position whose insert is then
    ignored (already stored) stays unused: readers step over the gap."""
    wanted = sorted(set(shards))
    if not wanted:
        return []
    marks = ", ".join("?" for _ in wanted)
    heads: dict[int, int] = dict(conn.execute(
        f"SELECT shard, last_pos FROM outbox_heads WHERE shard IN ({marks})", wanted))
    positions: list[int] = []
    for shard in shards:
        heads[shard] = heads.get(shard, 0) + 1
        positions.append(heads[shard])
    conn.executemany(
        "INSERT INTO outbox_heads (shard, last_pos) VALUES (?, ?)"
        " ON CONFLICT (shard) DO UPDATE SET last_pos = excluded.last_pos",
        [(s, heads[s]) for s in wanted])
    return positions


def read_page(conn: sqlite3.Connection, cursor: ShardCursor, limit: int) -> ShardPage:
    """``Store.read_events_by_shard`` in one read transaction."""
    rows = conn.execute("SELECT shard, last_pos, pruned_pos FROM outbox_heads").fetchall()
    check_unpruned(cursor, {r[0]: r[2] for r in rows})
    heads = {r[0]: r[1] for r in rows}
    ranges = plan_reads(cursor, heads, limit)
    events: list[Event] = []
    for r in ranges:
        events += [Event(row[0], bytes(row[1]), row[2], row[3], json.loads(row[4]), r.shard,
                         row[5])
                   for row in conn.execute(
                       "SELECT id, url_key, version, created_at, payload, shard_pos FROM events"
                       " WHERE shard = ? AND shard_pos > ? AND shard_pos <= ? ORDER BY shard_pos",
                       (r.shard, r.after, r.through))]
    return ShardPage(events, advance(cursor, ranges))


def cursor_at(conn: sqlite3.Connection, position: int) -> ShardCursor:
    """``Store.shard_cursor_at`` (the caller checks ``position`` is still readable): ids
    are commit order here, so in each shard the events with an id above ``position``
    are those above its first such event's position."""
    return ShardCursor({int(r[0]): int(r[1]) for r in conn.execute(
        "SELECT h.shard, coalesce((SELECT min(e.shard_pos) FROM events e"
        " WHERE e.shard = h.shard AND e.id > ?) - 1, h.last_pos) FROM outbox_heads h",
        (position,))})


def mark_pruned(conn: sqlite3.Connection, after: int, through: int) -> None:
    """Before the events with ids in ``(after, through]`` are removed: each of their
    shards' ``pruned_pos`` rises to the highest of them."""
    conn.execute(
        "UPDATE outbox_heads SET pruned_pos = max(pruned_pos, r.top) FROM ("
        " SELECT shard, max(shard_pos) AS top FROM events WHERE id > ? AND id <= ?"
        " GROUP BY shard) AS r WHERE outbox_heads.shard = r.shard", (after, through))
