"""PostgreSQL side of the per-shard named consumers (migration 0033): each row keeps the
consumer's :class:`ShardCursor` as its token. Registering and advancing run in one
transaction that first takes ``ROW EXCLUSIVE`` on ``shard_consumers`` (the retention's
``SHARE ROW EXCLUSIVE`` waits for it, and it for the retention: a new consumer starts at
each shard's ``pruned_pos`` as of after any prune in flight) and locks the consumer's row,
so concurrent advances merge instead of losing one another."""

from __future__ import annotations

from courtier.core.shard_cursor import ShardCursor
from courtier.store.consumer_kinds import refuse_other_kind
from courtier.store.postgres._rows import Conn

__all__ = ["advance", "all_cursors", "position", "refuse_per_shard", "register"]


async def position(conn: Conn, name: str) -> ShardCursor | None:
    token = await conn.fetchval("SELECT cursor FROM shard_consumers WHERE name = $1", name)
    return None if token is None else ShardCursor.from_token(str(token))


async def _locked(conn: Conn, name: str) -> ShardCursor | None:
    """In a transaction: refuse a crawl-wide name, lock the row of ``name``, its cursor."""
    await conn.execute("LOCK TABLE shard_consumers IN ROW EXCLUSIVE MODE")
    taken = await conn.fetchval("SELECT true FROM consumer_cursors WHERE name = $1", name)
    refuse_other_kind(name, bool(taken), by_shard=True)
    token = await conn.fetchval(
        "SELECT cursor FROM shard_consumers WHERE name = $1 FOR UPDATE", name)
    return None if token is None else ShardCursor.from_token(str(token))


async def _pruned(conn: Conn) -> ShardCursor:
    rows = await conn.fetch("SELECT shard, pruned_pos FROM outbox_heads WHERE pruned_pos > 0")
    return ShardCursor({int(r[0]): int(r[1]) for r in rows})


async def _store(conn: Conn, name: str, cursor: ShardCursor, now: float) -> None:
    await conn.execute(
        "INSERT INTO shard_consumers (name, cursor, updated_at) VALUES ($1, $2, $3)"
        " ON CONFLICT (name) DO UPDATE SET cursor = excluded.cursor,"
        " updated_at = excluded.updated_at", name, cursor.token(), now)


async def register(conn: Conn, name: str, now: float) -> ShardCursor:
    kept = await _locked(conn, name)
    if kept is not None:
        return kept
    start = await _pruned(conn)
    await _store(conn, name, start, now)
    return start


async def advance(conn: Conn, name: str, cursor: ShardCursor, now: float) -> ShardCursor:
    kept = await _locked(conn, name)  # an empty cursor is falsy: test for None
    moved = (await _pruned(conn) if kept is None else kept).advanced(cursor)
    await _store(conn, name, moved, now)
    return moved


async def all_cursors(conn: Conn) -> dict[str, ShardCursor]:
    rows = await conn.fetch("SELECT name, cursor FROM shard_consumers ORDER BY name")
    return {str(r[0]): ShardCursor.from_token(str(r[1])) for r in rows}


async def refuse_per_shard(conn: Conn, name: str) -> None:
    """ConfigError when ``name`` is a per-shard consumer (for the crawl-wide calls)."""
    taken = await conn.fetchval("SELECT true FROM shard_consumers WHERE name = $1", name)
    refuse_other_kind(name, bool(taken), by_shard=False)
