"""The events of planned shard ranges on plain PostgreSQL (``store/postgres/_shard_ranges.py``,
the second read of ``read_events_by_shard``): a descent of the ``(shard, shard_pos)``
index a range, however many ranges one read takes."""

from __future__ import annotations

import asyncpg

from courtier.store.postgres import PostgresStore
from courtier.store.postgres._shard_ranges import read_ranges
from courtier.store.shard_reads import ShardRange
from tests.integration.store.rows import T0

#: the index scans of the outbox's partitions in this transaction so far
_EVENTS_INDEX_SCANS = (
    "SELECT coalesce(sum(pg_stat_get_xact_numscans(i.indexrelid)), 0) FROM pg_index i"
    " JOIN pg_inherits p ON p.inhrelid = i.indrelid WHERE p.inhparent = 'events'::regclass")


async def test_a_read_descends_the_index_once_a_range(store: PostgresStore,
                                                       pg_module_dsn: str) -> None:
    """Seen red with ``e.shard = ANY(the ranges' shards)`` beside the join, as on Citus
    (issue #29): 40,000 descents for 200 ranges, the array an index condition of the
    nested loop's inner scan. The plan is the generic one, the plan a pooled
    connection's prepared statement settles on after its fifth run."""
    n = 200
    conn = await asyncpg.connect(pg_module_dsn)
    try:
        # 30 positions on each of 1,024 shards, in the partition of one day
        await conn.execute(
            "INSERT INTO events (shard, url_key, version, created_at, payload, shard_pos)"
            " SELECT g % 1024, decode(md5(g::text), 'hex'), 1, $1, '{}', g / 1024 + 1"
            " FROM generate_series(0, 30 * 1024 - 1) g", T0)
        await conn.execute("ANALYZE events")
        async with conn.transaction():
            await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            before = await conn.fetchval(_EVENTS_INDEX_SCANS)
            events = await read_ranges(conn, [ShardRange(s, 10, 20) for s in range(n)],
                                       on_citus=False)
            scans = await conn.fetchval(_EVENTS_INDEX_SCANS) - before
    finally:
        await conn.close()
    assert [(e.shard, e.shard_pos) for e in events] == [
        (s, pos) for s in range(n) for pos in range(11, 21)]
    assert scans <= 2 * n
