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
from courtier.store.postgres import PostgresStore, _rows
from tests.integration.store.rows import T0, finished, url_row
from tests.integration.store.test_postgres_store import _assert_host_queue_exact
from tests.pg import truncate

#: a table read whole, or a join that reads one side whole (Merge Append is fine)
WHOLE_TABLE = (r"Seq Scan|Hash (Right |Left |Full )?(Anti |Semi )?Join"
               r"|Merge (Right |Left |Full )?(Anti |Semi )?Join")
COMMIT = ("SELECT courtier_commit($1::courtier_commit[], $2::courtier_new_url[],"
          " $3::courtier_host_delta[], $4)")


async def test_the_commits_cached_plans_probe_by_key_after_the_tables_grew(
        pg_module_dsn: str) -> None:
    await truncate(pg_module_dsn)
    store = PostgresStore(pg_module_dsn, clock=VirtualClock(T0))
    await store.open()
    try:
        first = [url_row(f"http://small{i}.example/p", due=T0 - 5) for i in range(3)]
        await store.add_urls(first)
        read = await store.read_due(range(1024), T0, 10, 10)
        assert len(read) == 3
    finally:
        await store.close()
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
        conn.add_log_listener(lambda _c, msg: plans.append(str(msg.message)))
        await conn.execute(
            "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0;"
            " SET auto_explain.log_analyze = on; SET auto_explain.log_nested_statements = on;"
            " SET auto_explain.log_level = notice")
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
