"""The commit's callees keep their plans for the session (PostgreSQL migration
``commit_cached_plans``): planned while the store is nearly empty, they must still probe
by key once urls, host_levels and host_queue have grown, never read a table whole.

``courtier_queue_commit`` (the level seek and the host-queue upkeep), its helpers
``courtier_queue_lock`` and ``courtier_queue_from_levels``, and ``courtier_insert_urls``
(the links' intake) run with generic plans, sequential scans and hash and merge joins
off. The plans are read from auto_explain (nested statements) on the commit's own
session, after a first commit on the small tables made them.

Seen red with the migration's ``enable_seqscan = off`` and join settings left out
(generic plans made on the small tables; a scratch copy of the tree): once the tables
had grown, the host-queue rows' update from their levels read ``host_queue`` by a
sequential scan (117 ms for a batch of 200), in another run the level seek's statement
took a plan of 53 ms instead of 2.
"""

from __future__ import annotations

import dataclasses
import re
from itertools import chain

import asyncpg

from courtier.core.clock import VirtualClock
from courtier.core.records import NewUrl
from courtier.store.postgres import PostgresStore, _rows
from tests.integration.store.rows import T0, finished, url_row
from tests.integration.store.test_postgres_store import _assert_host_queue_exact
from tests.pg import truncate

#: a table read whole, or a join that reads one side whole (Merge Append is fine)
WHOLE_TABLE = (r"Seq Scan|Hash (Right |Left |Full )?(Anti |Semi )?Join"
               r"|Merge (Right |Left |Full )?(Anti |Semi )?Join")
COMMIT = ("SELECT courtier_commit($1::courtier_commit[], $2::courtier_new_url[],"
          " $3::courtier_host_delta[], $4)")


async def _queued(dsn: str, rows: list[NewUrl], per_host: int) -> int:
    """A truncated store holding ``rows``; how many of them a refill reads."""
    await truncate(dsn)
    store = PostgresStore(dsn, clock=VirtualClock(T0))
    await store.open()
    try:
        await store.add_urls(rows)
        return len(await store.read_due(range(1024), T0, 500, per_host))
    finally:
        await store.close()


async def _explain_to(conn: asyncpg.Connection, plans: list[str]) -> None:
    """Every plan of ``conn``'s statements from now on (nested ones included, with their
    actual rows and loops) is appended to ``plans`` (auto_explain's notices)."""
    conn.add_log_listener(lambda _c, msg: plans.append(str(msg.message)))
    await conn.execute(
        "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0;"
        " SET auto_explain.log_analyze = on; SET auto_explain.log_nested_statements = on;"
        " SET auto_explain.log_level = notice")


async def test_the_commits_cached_plans_probe_by_key_after_the_tables_grew(
        pg_module_dsn: str) -> None:
    first = [url_row(f"http://small{i}.example/p", due=T0 - 5) for i in range(3)]
    assert await _queued(pg_module_dsn, first, 10) == 3
    plans: list[str] = []
    conn = await asyncpg.connect(pg_module_dsn)
    try:
        await conn.execute("ANALYZE")  # statistics of the nearly empty tables
        # the session's plans made on the small tables: a commit of QUEUED rows (their
        # levels left, courtier_queue_commit) with links (courtier_insert_urls)
        links = [url_row(f"http://small{i}.example/link") for i in range(3)]
        commits = [finished(r) for r in first]
        commits[0] = dataclasses.replace(commits[0], new_urls=links)
        assert await conn.fetchval(COMMIT, _rows.commit_rows(commits),
                                   _rows.new_url_rows(links), [], T0) == [3, 0, 3]
        grown = [url_row(f"http://grown{i % 3000}.example/p{i}", priority=i % 3,
                         due=T0 - 5) for i in range(30_000)]
        grower = PostgresStore(pg_module_dsn, clock=VirtualClock(T0))
        await grower.open()
        try:
            await grower.add_urls_bulk(grown)
            batch = await grower.read_due(range(1024), T0, 200, 1)
        finally:
            await grower.close()
        assert len(batch) == 200
        by_key = {r.url_key: r for r in grown}
        commits = [finished(by_key[d.url_key]) for d in batch]
        news = [url_row(f"http://grown{i}.example/new") for i in range(100)]
        commits[0] = dataclasses.replace(commits[0], new_urls=news)
        await _explain_to(conn, plans)
        new_rows = _rows.new_url_rows(chain.from_iterable(c.new_urls for c in commits))
        assert await conn.fetchval(COMMIT, _rows.commit_rows(commits), new_rows, [],
                                   T0 + 1) == [200, 0, 100]
    finally:
        await conn.close()
    callees = {
        "the level seek": "fresh AS",
        "the host-queue lock": "'infinity'::double precision, 0",
        "the host-queue rows from their levels": "agg AS",
        "the links' intake": "WITH added AS",
    }
    for what, marker in callees.items():
        found = [p for p in plans if marker in p and "Query Text" in p]
        assert found, f"{what}: no plan logged"
        for plan in found:
            assert not re.search(WHOLE_TABLE, plan), (what, plan)
    await _assert_host_queue_exact(pg_module_dsn)


def _loops(plan: str, node: str) -> list[int]:
    """The ``loops`` of every plan node ``node`` (e.g. ``CTE Scan on heads``) in ``plan``."""
    return [int(n) for n in re.findall(re.escape(node) + r"\b[^\n]*loops=(\d+)", plan)]


async def test_the_events_positions_are_made_once_a_statement(pg_module_dsn: str) -> None:
    """The events of a batch take their shard positions from the heads the statement has
    just advanced, gathered into one row (``head_list``, migration 0041): the heads are
    read once a statement, not once an event (the planner had inlined the CTE into the
    events insert, which then read every head again for every event row: batch × shards).

    Seen red with the migration's ``MATERIALIZED`` taken out: the heads' scan ran 200
    times for a batch of 200 results."""
    rows = [url_row(f"http://spread{i}.example/p", due=T0 - 5) for i in range(200)]
    assert await _queued(pg_module_dsn, rows, 1) == 200
    plans: list[str] = []
    conn = await asyncpg.connect(pg_module_dsn)
    try:
        await _explain_to(conn, plans)
        assert await conn.fetchval(COMMIT, _rows.commit_rows([finished(r) for r in rows]),
                                   [], [], T0 + 1) == [200, 0, 0]
        positions = await conn.fetch("SELECT shard, shard_pos FROM events")
    finally:
        await conn.close()
    shards = {r.shard for r in rows}
    assert len(shards) > 100  # a batch over many shards: the case that multiplied
    applying = [p for p in plans if "logged_events AS" in p and "Query Text" in p]
    assert applying, "auto_explain sent no plan of the statement that applies the batch"
    for plan in applying:
        loops = _loops(plan, "CTE Scan on heads")
        assert loops and max(loops) == 1, plan
    # and the positions are still each shard's 1, 2, … in its commit order
    by_shard: dict[int, list[int]] = {}
    for r in positions:
        by_shard.setdefault(r["shard"], []).append(r["shard_pos"])
    assert set(by_shard) == shards
    assert all(sorted(p) == list(range(1, len(p) + 1)) for p in by_shard.values())
