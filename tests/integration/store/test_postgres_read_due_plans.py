"""The refill's read keeps generic plans for the session (PostgreSQL migration
``due_rows_carry_value``): planned while the store is nearly empty, its statements must
still read by index once urls and host_queue have grown, never read a table whole, and
its rows must be the same as a fresh session's.

``courtier_read_due`` was planned again at every batch of its walk (custom plans with the
caller's arrays as constants: 1,024 shards for a lone worker), which cost more than the
reads themselves (bench/README.md, issue 29). The plans are read from auto_explain
(nested statements) on one session, after a first read on the small tables made them.
"""

from __future__ import annotations

import re

import asyncpg

from courtier.core.clock import VirtualClock
from courtier.store.postgres import PostgresStore, _rows
from tests.integration.store.rows import T0, url_row
from tests.integration.store.test_postgres_commit_plans import WHOLE_TABLE
from tests.pg import truncate

READ = ("SELECT * FROM courtier_read_due($1::integer[], $2, $3, $4, $5, '{}'::text[])"
        " ORDER BY walk")


async def test_the_refills_cached_plans_read_by_index_after_the_tables_grew(
        pg_module_dsn: str) -> None:
    await truncate(pg_module_dsn)
    store = PostgresStore(pg_module_dsn, clock=VirtualClock(T0))
    await store.open()
    try:
        await store.add_urls([url_row(f"http://small{i}.example/p", due=T0 - 5)
                              for i in range(3)])
    finally:
        await store.close()
    plans: list[str] = []
    conn = await asyncpg.connect(pg_module_dsn)
    try:
        await conn.execute("ANALYZE")  # statistics of the nearly empty tables
        shards = list(range(1024))
        assert len(await conn.fetch(READ, shards, T0, T0 - 3600, 10, 10)) == 3  # plans made
        grown = [url_row(f"http://grown{i % 3000}.example/p{i}", priority=i % 3,
                         due=T0 - 5) for i in range(30_000)]
        grower = PostgresStore(pg_module_dsn, clock=VirtualClock(T0))
        await grower.open()
        try:
            await grower.add_urls_bulk(grown)
            fresh = await grower.read_due(shards, T0, 300, 2)  # another session's plans
        finally:
            await grower.close()
        conn.add_log_listener(lambda _c, msg: plans.append(str(msg.message)))
        await conn.execute(
            "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0;"
            " SET auto_explain.log_analyze = on; SET auto_explain.log_nested_statements = on;"
            " SET auto_explain.log_level = notice")
        rows = await conn.fetch(READ, shards, T0, T0 - 3600, 300, 2)
    finally:
        await conn.close()
    assert [_rows.due_url(r) for r in rows] == fresh and len(fresh) == 300
    statements = {"the host range": "WITH r AS MATERIALIZED", "the probes": "WITH probed AS"}
    for what, marker in statements.items():
        found = [p for p in plans if marker in p and "Query Text" in p]
        assert found, f"{what}: no plan logged"
        for plan in found:
            assert not re.search(WHOLE_TABLE, plan), (what, plan)
