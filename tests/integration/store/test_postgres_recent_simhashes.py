"""The near-duplicate index's start-up read stays bounded by what it returns (migration 0019).

``load_simhashes`` runs when a worker starts and for every shard it gains, before the
shard joins the refill. Without an index in its order it read every row of each shard
and sorted the fingerprinted ones: minutes for a worker taking every shard of a 10 M-URL
store. PostgreSQL's own account of the store's statement (``EXPLAIN ANALYZE``) is the
observer here: with most of each shard's rows never fetched (no fingerprint), the rows
the plan reads from ``urls`` must stay near the rows it returns.
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from courtier.store.postgres import PostgresStore
from courtier.store.postgres._cluster import RECENT_SIMHASHES
from tests.pg import truncate

SHARDS = [0, 1, 2, 3]
ROWS_PER_SHARD = 5_000
FINGERPRINTED = 100
LIMIT = 10


def _urls_rows_read(node: dict[str, Any]) -> int:
    """Rows the plan's scans of ``urls`` partitions read: returned plus filtered out."""
    read = 0
    if str(node.get("Relation Name", "")).startswith("urls"):
        loops = int(node.get("Actual Loops", 1))
        read += (int(node["Actual Rows"]) + int(node.get("Rows Removed by Filter", 0))) * loops
    for child in node.get("Plans", []):
        read += _urls_rows_read(child)
    return read


async def test_the_start_up_read_of_fingerprints_reads_about_what_it_returns(
        pg_module_dsn: str) -> None:
    await truncate(pg_module_dsn)
    store = PostgresStore(pg_module_dsn)
    await store.open()
    admin = await asyncpg.connect(pg_module_dsn)
    try:
        # per shard: ROWS_PER_SHARD known rows, the first FINGERPRINTED of them fetched
        await admin.execute(
            "INSERT INTO urls (shard, url_key, url, host_key, discovered_at, last_fetch_at,"
            " simhash)"
            " SELECT s, decode(lpad(to_hex(s), 4, '0') || md5(s || '/' || i), 'hex'),"
            " 'http://h' || s || '.example/' || i, 'h' || s || '.example:80', 0,"
            " CASE WHEN i <= $2 THEN i::float8 END, CASE WHEN i <= $2 THEN i END"
            " FROM unnest($1::integer[]) AS s, generate_series(1, $3::integer) AS i",
            SHARDS, FINGERPRINTED, ROWS_PER_SHARD)
        await admin.execute("ANALYZE urls")
        plan = json.loads(await admin.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + RECENT_SIMHASHES, SHARDS, LIMIT))[0]["Plan"]
        found = await store.load_simhashes(SHARDS, LIMIT)
    finally:
        await admin.close()
        await store.close()

    assert {shard: len(rows) for shard, rows in found.items()} == {s: LIMIT for s in SHARDS}
    newest = sorted(found[2], key=lambda row: -row[1])  # simhash = i = last_fetch_at here
    assert [fp for _, fp in newest] == list(range(FINGERPRINTED, FINGERPRINTED - LIMIT, -1))
    read = _urls_rows_read(plan)
    assert 0 < read <= 2 * LIMIT * len(SHARDS), json.dumps(plan)[:3000]
