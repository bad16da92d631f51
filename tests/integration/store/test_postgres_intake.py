"""The PostgreSQL intake (migration 0018): its plain INSERT meeting another transaction's
insert of the same new key, and its generic plans on tables that grew after planning.

``courtier_add_urls`` inserts without ON CONFLICT and falls back to migration 15's
``ON CONFLICT DO NOTHING`` statement when the INSERT fails on a key that another
transaction inserted and committed while this one waited for it. Here that other
transaction is held open by hand; the observer of the wait is PostgreSQL's own
pg_stat_activity, and the outcome decides (no sleep orders anything).
"""

from __future__ import annotations

import asyncio
import re

import asyncpg
import pytest

from courtier.core.clock import VirtualClock
from courtier.store.postgres import PostgresStore, _rows
from tests.integration.store.rows import T0, url_row
from tests.integration.store.test_postgres_store import _assert_host_queue_exact
from tests.pg import truncate

ADD = "SELECT courtier_add_urls($1::courtier_new_url[])"


async def _wait_until_blocked(observer: asyncpg.Connection, task: asyncio.Future[int]) -> None:
    """Return once some backend waits for a lock inside courtier_add_urls."""
    while not await observer.fetchval(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE '%courtier_add_urls%')"):
        assert not task.done(), "the intake finished without waiting for the held key"
        await asyncio.sleep(0.01)  # polling, not ordering: the outcome decides


@pytest.mark.parametrize("holder_commits", [True, False])
async def test_an_intake_that_waited_for_a_new_key_skips_it_only_if_it_was_committed(
        pg_module_dsn: str, holder_commits: bool) -> None:
    await truncate(pg_module_dsn)
    store = PostgresStore(pg_module_dsn, clock=VirtualClock(T0))
    await store.open()
    held = url_row("http://held.example/k", priority=4, due=T0 + 5)
    mine = url_row("http://held.example/k", priority=1, due=T0 + 1)  # same key
    others = [url_row(f"http://held.example/p{i}", priority=2, due=T0 + 9) for i in range(3)]
    holder, observer = await asyncpg.connect(pg_module_dsn), await asyncpg.connect(pg_module_dsn)
    try:
        tx = holder.transaction()
        await tx.start()
        assert await holder.fetchval(ADD, _rows.new_url_rows([held])) == 1
        task = asyncio.ensure_future(store.add_urls([others[0], mine, *others[1:]]))
        await _wait_until_blocked(observer, task)
        if holder_commits:
            await tx.commit()
        else:
            await tx.rollback()
        added = await asyncio.wait_for(task, timeout=30)
        row = await store.get_url(held.url_key)
    finally:
        await holder.close()
        await observer.close()
        await store.close()
    assert row is not None
    if holder_commits:  # the holder's row stays; ours of that key was skipped
        assert added == 3
        assert (row["priority"], row["next_fetch_at"]) == (4, T0 + 5)
    else:
        assert added == 4
        assert (row["priority"], row["next_fetch_at"]) == (1, T0 + 1)
    await _assert_host_queue_exact(pg_module_dsn)


async def test_the_intakes_cached_plans_probe_by_key_after_the_tables_grew(
        pg_module_dsn: str) -> None:
    """Planned once for the session while urls is empty (a new crawl), each statement of
    courtier_add_urls must still find known keys by a primary-key probe once urls holds
    many rows, never by reading a partition whole."""
    await truncate(pg_module_dsn)
    store = PostgresStore(pg_module_dsn, clock=VirtualClock(T0))
    await store.open()
    await store.close()
    plans: list[str] = []
    conn = await asyncpg.connect(pg_module_dsn)
    try:
        await conn.execute("ANALYZE urls")  # statistics of the empty table
        assert await conn.fetchval(ADD, _rows.new_url_rows([url_row("http://first.example/")]))
        await conn.execute(
            "INSERT INTO urls (shard, url_key, url, host_key, depth, priority, state,"
            " version, discovered_at, next_fetch_at)"
            " SELECT i % 1024, decode(lpad(to_hex(i % 1024), 4, '0') || md5(i::text), 'hex'),"
            " 'http://grown' || i || '.example/', 'grown' || i || '.example:80', 1, 0, 2, 1,"
            " $1::float8, $1::float8 + 86400 FROM generate_series(1, 50000) AS i", T0)
        conn.add_log_listener(lambda _c, msg: plans.append(str(msg.message)))
        await conn.execute(
            "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0;"
            " SET auto_explain.log_analyze = on; SET auto_explain.log_nested_statements = on;"
            " SET auto_explain.log_level = notice")
        batch = [url_row(f"http://h{i % 7}.example/p{i}", priority=i % 3) for i in range(200)]
        assert await conn.fetchval(ADD, _rows.new_url_rows(batch)) == 200
        assert await conn.fetchval(ADD, _rows.new_url_rows(batch)) == 0
    finally:
        await conn.close()
    inserts = [p for p in plans if "INSERT INTO urls" in p]
    assert len(inserts) == 2, plans
    for plan in inserts:
        assert not re.search(r"Seq Scan|Hash (Right )?(Anti |Semi )?Join|Merge", plan), plan
        assert "Index Only Scan using urls_p" in plan, plan
    await _assert_host_queue_exact(pg_module_dsn)
