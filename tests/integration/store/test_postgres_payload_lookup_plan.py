"""The payload look-up probes the payloads key for each digest, never scans the table
(PostgreSQL migration ``payload_lookup_by_index``).

A crawl asks for up to 256 digests a statement (dedup/payload_lookups.py). As a plain
``digest = ANY($1)`` statement the planner chose a sequential scan of payloads for 256
digests on a table of 20,000 rows (this test, red so), and the crawl's look-ups read
the whole table again and again (bench/README.md, "Where PostgreSQL's CPU goes").
Counted on the statement's own transaction (``pg_stat_xact_user_tables``) on plain
PostgreSQL. The Citus store keeps the plain statement (Citus cannot plan a distributed
statement with sequential scans off); its test checks the answers.

Seen red with ``_queries.payload_locations`` sending migration 35's plain statement
(a scratch copy): one sequential scan of payloads for the 256 digests.
"""

from __future__ import annotations

import hashlib

import asyncpg

from courtier.store.postgres import PostgresStore, _queries

ROWS = 20_000


async def _fill(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "INSERT INTO payloads (digest, warc_file, warc_offset, url, fetched_at)"
            " SELECT 'sha1:' || md5(i::text), 'w-' || (i % 7) || '.warc.gz', i,"
            " 'http://h' || i || '.example/', 1000.0 + i FROM generate_series(1, $1) AS i",
            ROWS)
        await conn.execute("ANALYZE payloads")  # the planner knows the table's size
    finally:
        await conn.close()


def _digests() -> list[str]:
    """256 digests, one in four stored (every fourth i of the filled rows)."""
    out = []
    for n in range(256):
        i = 4 * n + 1 if n % 4 == 0 else ROWS + n  # beyond ROWS: never stored
        out.append("sha1:" + hashlib.md5(str(i).encode()).hexdigest())
    return out


async def test_a_batch_of_digests_probes_the_key_and_never_scans_payloads(
        store: PostgresStore, pg_module_dsn: str) -> None:
    await _fill(pg_module_dsn)
    digests = _digests()
    async with (asyncpg.create_pool(pg_module_dsn, min_size=1, max_size=1) as pool,
                pool.acquire() as conn, conn.transaction()):
        found = await _queries.payload_locations(conn, digests)
        scans = await conn.fetchrow("SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables"
                                    " WHERE relname = 'payloads'")
    assert len(found) == 64
    assert found[digests[0]] == ("w-1.warc.gz", 1, "http://h1.example/", 1001.0)
    assert scans["seq_scan"] == 0
    assert scans["idx_scan"] >= 1
    # the store's own call answers the same
    assert await store.payload_locations(digests) == found


async def test_the_look_up_answers_the_same_on_citus(
        citus_store: PostgresStore, citus_module_dsn: str) -> None:
    await _fill(citus_module_dsn)
    digests = _digests()
    found = await citus_store.payload_locations(digests)
    assert len(found) == 64
    assert found[digests[4]] == ("w-3.warc.gz", 17, "http://h17.example/", 1017.0)
