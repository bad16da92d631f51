"""A refill's work stays per row when the planner's statistics are stale (migration 0016).

Every new crawl grows its tables faster than autovacuum analyzes them, so the planner
may believe that almost no row is QUEUED while thousands are. The refill's marking
UPDATE (chosen keys joined to ``urls``) then read every QUEUED row once and compared it
with every chosen key: seen as a 9 s refill of 2,000 rows in the many-workers bench.
Here the statistics are made stale on purpose (analyzed while every row was done,
autovacuum off) and PostgreSQL's own account of the refill (auto_explain with
ANALYZE, sent to this client as notices) is the observer: no plan node of the refill
may discard more pairs of rows in a join filter than a handful per chosen row. The
commit, which keeps generic plans since the same migration, is held to the same
account (and may not read a urls partition whole).
"""

from __future__ import annotations

import re

import asyncpg

from courtier.core.clock import VirtualClock
from courtier.store.postgres import PostgresStore, _rows
from tests.integration.store.rows import T0, finished, url_row
from tests.pg import truncate

DONE_ROWS = 20_000
QUEUED_ROWS = 4_000
REFILL = 2_000


async def _stale_store(dsn: str) -> PostgresStore:
    """A store whose statistics say that almost no row is QUEUED, holding QUEUED_ROWS
    due rows on 400 hosts (autovacuum off, so nothing corrects the statistics)."""
    await truncate(dsn)
    store = PostgresStore(dsn, clock=VirtualClock(T0))
    await store.open()
    admin = await asyncpg.connect(dsn)
    try:
        partitions = await admin.fetch(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'urls'::regclass")
        for p in partitions:
            await admin.execute(f'ALTER TABLE "{p["relname"]}" SET (autovacuum_enabled = false)')
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
    rows = [url_row(f"http://h{i % 400}.example/p{i}", due=T0 - 10) for i in range(QUEUED_ROWS)]
    await store.add_urls(rows)
    return store


async def _explained(dsn: str) -> tuple[asyncpg.Connection, list[str]]:
    """A connection whose every statement's plan, with actual row counts, arrives as a
    notice in the returned list (auto_explain, nested statements included)."""
    plans: list[str] = []
    conn = await asyncpg.connect(dsn)
    conn.add_log_listener(lambda _c, msg: plans.append(str(msg.message)))
    await conn.execute(
        "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0;"
        " SET auto_explain.log_analyze = on; SET auto_explain.log_nested_statements = on;"
        " SET auto_explain.log_level = notice")
    return conn, plans


def _most_pairs_removed(plans: list[str]) -> int:
    found = [int(n) for p in plans for n in re.findall(r"Rows Removed by Join Filter: (\d+)", p)]
    return max(found, default=0)


async def test_stale_statistics_do_not_make_the_refill_compare_every_pair(
        pg_module_dsn: str) -> None:
    store = await _stale_store(pg_module_dsn)
    try:
        watcher, plans = await _explained(pg_module_dsn)
        try:
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
    assert _most_pairs_removed(plans) <= 20 * REFILL, marking[0][:3000]


async def test_the_commits_cached_plans_probe_by_key_with_stale_statistics(
        pg_module_dsn: str) -> None:
    """courtier_commit keeps generic plans for the session (migration 0016): planned
    once without the batch's values, with statistics that are wrong by thousands of
    QUEUED rows, each of its statements must still touch urls by key."""
    store = await _stale_store(pg_module_dsn)
    try:
        due = await store.load_due(list(range(1024)), T0, REFILL, 64)
        assert len(due) == REFILL
        watcher, plans = await _explained(pg_module_dsn)
        try:
            applied = 0
            for start in range(0, REFILL, 250):
                batch = [finished(url_row(d.url)) for d in due[start:start + 250]]
                result = await watcher.fetchval(
                    "SELECT courtier_commit($1::courtier_commit[], $2::courtier_new_url[],"
                    " $3::courtier_host_delta[], $4)", _rows.commit_rows(batch), [], [], T0 + 2)
                applied += result[0]
        finally:
            await watcher.close()
        counts = await store.counts()
    finally:
        await store.close()

    assert applied == REFILL and counts["scheduled"] == 0
    assert any("UPDATE urls u SET" in p for p in plans)
    assert not any(re.search(r"Seq Scan on urls_p", p) for p in plans)
    assert _most_pairs_removed(plans) <= 20 * 250
