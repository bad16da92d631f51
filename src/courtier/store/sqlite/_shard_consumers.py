"""SQLite side of the per-shard named consumers (migration shard_consumers): each row
keeps the consumer's :class:`ShardCursor` as its token; one writer at a time, so a
read-merge-write in the write transaction never loses a concurrent advance."""

from __future__ import annotations

import sqlite3

from courtier.core.shard_cursor import ShardCursor
from courtier.store.consumer_kinds import refuse_other_kind

__all__ = ["advance", "all_cursors", "position", "refuse_per_shard", "register"]


def position(conn: sqlite3.Connection, name: str) -> ShardCursor | None:
    row = conn.execute("SELECT cursor FROM shard_consumers WHERE name = ?", (name,)).fetchone()
    return None if row is None else ShardCursor.from_token(str(row[0]))


def _refuse_crawl_wide(conn: sqlite3.Connection, name: str) -> None:
    taken = conn.execute("SELECT 1 FROM consumer_cursors WHERE name = ?", (name,)).fetchone()
    refuse_other_kind(name, taken is not None, by_shard=True)


def _pruned(conn: sqlite3.Connection) -> ShardCursor:
    return ShardCursor({int(r[0]): int(r[1]) for r in conn.execute(
        "SELECT shard, pruned_pos FROM outbox_heads WHERE pruned_pos > 0")})


def register(conn: sqlite3.Connection, name: str, now: float) -> ShardCursor:
    _refuse_crawl_wide(conn, name)
    kept = position(conn, name)
    if kept is not None:
        return kept
    start = _pruned(conn)
    conn.execute("INSERT INTO shard_consumers (name, cursor, updated_at) VALUES (?, ?, ?)",
                 (name, start.token(), now))
    return start


def advance(conn: sqlite3.Connection, name: str, cursor: ShardCursor,
            now: float) -> ShardCursor:
    _refuse_crawl_wide(conn, name)
    kept = position(conn, name)  # an empty cursor is falsy: test for None
    moved = (_pruned(conn) if kept is None else kept).advanced(cursor)
    conn.execute("INSERT INTO shard_consumers (name, cursor, updated_at) VALUES (?, ?, ?)"
                 " ON CONFLICT (name) DO UPDATE SET cursor = excluded.cursor,"
                 " updated_at = excluded.updated_at", (name, moved.token(), now))
    return moved


def all_cursors(conn: sqlite3.Connection) -> dict[str, ShardCursor]:
    return {str(r[0]): ShardCursor.from_token(str(r[1])) for r in conn.execute(
        "SELECT name, cursor FROM shard_consumers ORDER BY name")}


def refuse_per_shard(conn: sqlite3.Connection, name: str) -> None:
    """ConfigError when ``name`` is a per-shard consumer (for the crawl-wide calls)."""
    taken = conn.execute("SELECT 1 FROM shard_consumers WHERE name = ?", (name,)).fetchone()
    refuse_other_kind(name, taken is not None, by_shard=False)
