"""A worker's start-up reads stay bounded by what they return (migrations 0019, 0020).

When a worker starts, gains a shard, or recovers from a refill whose outcome it does not
know, it reads each shard's most recent fingerprints (``load_simhashes``) and returns the
shard's SCHEDULED rows to the queue (``reset_scheduled``). Without indexes for them both
read every row of the shards: minutes for a worker taking every shard of a 10 M-URL
store. PostgreSQL's own account of the store's statements (``EXPLAIN ANALYZE``) is the
observer: with most of the shards' rows neither fingerprinted nor SCHEDULED, the rows a
plan reads from ``urls`` must stay near the rows it returns.
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from courtier.store.postgres import PostgresStore
from courtier.store.postgres._cluster import RECENT_SIMHASHES
from courtier.store.postgres._queries import RESET_SCHEDULED
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


async def _filled(dsn: str) -> tuple[PostgresStore, asyncpg.Connection]:
    """Per shard ROWS_PER_SHARD known rows; the first FINGERPRINTED of them fetched (a
    fingerprint and a fetch time) and SCHEDULED (as if a refill had just marked them)."""
    await truncate(dsn)
    store = PostgresStore(dsn)
    await store.open()
    admin = await asyncpg.connect(dsn)
    await admin.execute(
        "INSERT INTO urls (shard, url_key, url, host_key, discovered_at, last_fetch_at,"
        " simhash, state)"
        " SELECT s, decode(lpad(to_hex(s), 4, '0') || md5(s || '/' || i), 'hex'),"
        " 'http://h' || s || '.example/' || i, 'h' || s || '.example:80', 0,"
        " CASE WHEN i <= $2 THEN i::float8 END, CASE WHEN i <= $2 THEN i END,"
        " CASE WHEN i <= $2 THEN 1 ELSE 2 END"
        " FROM unnest($1::integer[]) AS s, generate_series(1, $3::integer) AS i",
        SHARDS, FINGERPRINTED, ROWS_PER_SHARD)
    await admin.execute("ANALYZE urls")
    return store, admin


async def test_the_start_up_read_of_fingerprints_reads_about_what_it_returns(
        pg_module_dsn: str) -> None:
    store, admin = await _filled(pg_module_dsn)
    try:
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


async def test_resetting_scheduled_rows_reads_about_what_it_changes(
        pg_module_dsn: str) -> None:
    store, admin = await _filled(pg_module_dsn)
    try:
        rolled_back = admin.transaction()  # EXPLAIN ANALYZE runs the UPDATE: undo it
        await rolled_back.start()
        plan = json.loads(await admin.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + RESET_SCHEDULED, SHARDS))[0]["Plan"]
        await rolled_back.rollback()
        reset = await store.reset_scheduled(SHARDS)
        queued = await admin.fetchval("SELECT count(*) FROM urls WHERE state = 0")
    finally:
        await admin.close()
        await store.close()

    assert reset == queued == FINGERPRINTED * len(SHARDS)
    read = _urls_rows_read(plan)
    assert 0 < read <= 2 * FINGERPRINTED * len(SHARDS), json.dumps(plan)[:3000]
