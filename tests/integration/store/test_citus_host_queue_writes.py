"""On Citus the commit's host-queue upkeep (citus/queue_commit.sql) recomputes only the
hosts whose levels it may have changed, and its lock (citus/refill.sql) writes no row
version: the queue stays exact (checked against urls after each commit).

Seen red with the loop's hosts left out of the recomputation (a scratch copy): the
retired page's level moved and the host's queue row kept the old due time.
"""

from __future__ import annotations

import dataclasses

from courtier.store.postgres import PostgresStore
from tests.integration.store.rows import T0, finished, url_row
from tests.integration.store.test_postgres_store import _assert_host_queue_exact


async def test_the_citus_commit_keeps_the_host_queue_exact(
        citus_store: PostgresStore, citus_module_dsn: str) -> None:
    # one host, one level, three due times; a second host with a tie
    moving = [url_row(f"http://moving.example/p{i}", due=T0 - 5 + i) for i in range(3)]
    tied = [url_row(f"http://tied.example/p{i}", due=T0 - 5) for i in range(2)]
    await citus_store.add_urls(moving + tied)
    read = await citus_store.read_due(range(1024), T0, 10, 1)
    by_key = {r.url_key: r for r in moving + tied}
    assert len(read) == 2
    # retired (not re-queued): the moving host's level moves to the next page's time,
    # the tied host's level keeps its time (no recomputation needed)
    retired = [dataclasses.replace(finished(by_key[d.url_key]), next_fetch_at=None)
               for d in read]
    assert (await citus_store.commit(retired)).applied == 2
    await _assert_host_queue_exact(citus_module_dsn)
    # the rest, re-queued, with a link to a new host
    rest = await citus_store.read_due(range(1024), T0, 10, 5)
    assert len(rest) == 3
    commits = [finished(by_key[d.url_key]) for d in rest]
    commits[0] = dataclasses.replace(commits[0],
                                     new_urls=[url_row("http://fresh.example/")])
    assert (await citus_store.commit(commits)).applied == 3
    await _assert_host_queue_exact(citus_module_dsn)
