"""The events of planned shard ranges (``store/shard_reads.py``), the second read of
``PostgresStore.read_events_by_shard``: ``events`` joined with the ranges' arrays by the
``(shard, shard_pos)`` index, a descent a range.

On Citus the shards are also named as ``e.shard = ANY(…)``, by which it prunes the
distributed table to the shards read (a join with an array is not pruned). On plain
PostgreSQL they are not: the join fixes each range's shard, and as a second index
condition of the nested loop's inner scan the array made PostgreSQL 15 descend the
index once an element for each range, ranges² descents (40,000 for 200 ranges under the
generic plan a pooled connection's prepared statement settles on)."""

from __future__ import annotations

from collections.abc import Sequence

from courtier.store.base import UNPLACED, Event
from courtier.store.postgres import _rows
from courtier.store.postgres._rows import Conn
from courtier.store.shard_reads import ShardRange

_SELECT = (
    "SELECT coalesce(e.read_pos, $4) AS pos, e.url_key, e.version, e.created_at,"
    " e.payload, e.shard, e.shard_pos FROM events e"
    " JOIN unnest($1::integer[], $2::bigint[], $3::bigint[]) AS r(s, lo, hi)"
    " ON e.shard = r.s AND e.shard_pos > r.lo AND e.shard_pos <= r.hi")
_ORDER = " ORDER BY e.shard, e.shard_pos"
#: Citus prunes by the array (docs/scale-out.md)
_PRUNED = " WHERE e.shard = ANY($1::integer[])"


def ranges_query(on_citus: bool) -> str:
    return _SELECT + (_PRUNED if on_citus else "") + _ORDER


async def read_ranges(conn: Conn, ranges: Sequence[ShardRange], on_citus: bool
                      ) -> list[Event]:
    """The events of ``ranges``, by shard, then position."""
    rows = await conn.fetch(ranges_query(on_citus), [r.shard for r in ranges],
                            [r.after for r in ranges], [r.through for r in ranges],
                            UNPLACED)
    return [_rows.event_of(r) for r in rows]
