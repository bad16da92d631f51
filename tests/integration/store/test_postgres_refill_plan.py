"""A refill's work stays per row when the planner's statistics are stale (migration 0016).

Every new crawl grows its tables faster than autovacuum analyzes them, so the planner
may believe that almost no row is QUEUED while thousands are. The refill's marking
UPDATE (chosen keys joined to ``urls``) then read every QUEUED row once and compared it
with every chosen key: seen as a 9 s refill of 2,000 rows in the many-workers bench.
Here the statistics are made stale on purpose (analyzed while every row was done,
autovacuum off) and PostgreSQL's own account of the refill (auto_explain with
ANALYZE, sent to this client as notices) is the observer: no plan node of the refill
may discard more pairs of rows in a join filter than a handful per chosen row.
"""

from __future__ import annotations

import re

import asyncpg

from courtier.clock import VirtualClock
from courtier.store.postgres import PostgresStore
from tests.integration.store.rows import T0, url_row
from tests.pg import truncate

DONE_ROWS = 20_000
QUEUED_ROWS = 4_000
REFILL = 2_000


async def test_stale_statistics_do_not_make_the_refill_compare_every_pair(
        pg_module_dsn: str) -> None:
    await truncate(pg_module_dsn)
    store = PostgresStore(pg_module_dsn, clock=VirtualClock(T0))
    await store.open()
    try:
        admin = await asyncpg.connect(pg_module_dsn)
        try:
            partitions = await admin.fetch(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                " WHERE i.inhparent = 'urls'::regclass")
            for p in partitions:
                await admin.execute(
                    f'ALTER TABLE "{p["relname"]}" SET (autovacuum_enabled = false)')
            # done rows of other hosts (not in the host queue), analyzed: "QUEUED is rare"
            await admin.execute(
                "INSERT INTO urls (shard, url_key, url, host_key, depth, priority, state,"
                " version, discovered_at, next_fetch_at)"
                " SELECT i % 1024, decode(lpad(to_hex(i % 1024), 4, '0') || md5(i::text), 'hex'),"
                " 'http://done' || i || '.example/', 'done' || i || '.example:80', 1, 0, 2, 1,"
                " $1::float8, $1::float8 + 86400 FROM generate_series(1, $2::integer) AS i",
                T0, DONE_ROWS)
            await admin.execute("ANALYZE urls")
        finally:
            await admin.close()
        rows = [url_row(f"http://h{i % 400}.example/p{i}", due=T0 - 10)
                for i in range(QUEUED_ROWS)]
        await store.add_urls(rows)

        plans: list[str] = []
        watcher = await asyncpg.connect(pg_module_dsn)
        try:
            watcher.add_log_listener(lambda _c, msg: plans.append(str(msg.message)))
            await watcher.execute(
                "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0;"
                " SET auto_explain.log_analyze = on; SET auto_explain.log_nested_statements = on;"
                " SET auto_explain.log_level = notice")
            due = await watcher.fetch(
                "SELECT * FROM courtier_load_due($1, $2, $3, $4, $5, $6)",
                list(range(1024)), T0, T0 - 3600, REFILL, 64, [])
        finally:
            await watcher.close()
    finally:
        await store.close()

    assert len(due) == REFILL  # the refill did its work
    assert len({r["url_key"] for r in due}) == REFILL
    marking = [p for p in plans if "UPDATE urls u SET state = 1" in p]
    assert marking, "auto_explain sent no plan of the marking statement"
    removed = [int(n) for p in plans for n in re.findall(r"Rows Removed by Join Filter: (\d+)", p)]
    assert max(removed, default=0) <= 20 * REFILL, (max(removed), marking[0][:3000])
