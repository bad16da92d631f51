"""Database nodes changing under a crawl on Citus (issue 30, "Done when"): a worker
node joins and the shards move while courtier workers die and join.

A Citus cluster of the test's own (tests/citus_cluster.py: a coordinator and two worker
nodes; the session's ``citus`` fixture is not touched), a database on it, two
``courtier worker`` processes (w0, w1) crawling the local test web through the
coordinator. Mid-crawl, each step started when the test web's log shows the crawl at a
given point (never after a sleep):

1. a third worker node is started, added (``citus_add_node``) and the shards rebalanced
   by logical replication (``citus_rebalance_start(shard_transfer_mode :=
   'force_logical')``, then ``citus_rebalance_wait()``) while both workers crawl;
2. w1 is killed -9 and w2 joins.

Judged by the test web's own log (every expected page fetched; pages fetched after the
rebalance ended and by w2, so the changes happened mid-crawl; a page fetched twice only
if the killed worker had fetched it, or within the survivors' own counts of stale
commits and fence-cancelled fetches; no politeness violation with the crawl's delays),
by the outbox (one event per (URL, version), one final event per URL, and a consumer
reading it all along: dense positions, none of its reads refused while shards moved, at
least one event read during the rebalance) and by Citus's placement of the URL rows (on
all three worker nodes).

Seen red: with the store's Citus step not giving the outbox's and fetch log's time
partitions a replica identity (``_citus.REPLICA_IDENTITIES`` not run), "54 outbox reads
refused, e.g. ... cannot update table "events_default_102208" because it does not have
a replica identity and publishes updates" (the sequencer's UPDATE of ``read_pos`` on a
shard being moved); the assertions before it (every page, one event per (URL,
version)) passed. Not broken here: the placement assertion
(it counts the nodes that hold URL rows, as test_citus_crawl.py does).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from pathlib import Path

import asyncpg
import pytest

from courtier.testweb.killloop import final_event_problems
from courtier.testweb.server import TestWebServer
from tests.integration.cluster.citus_nodes import (
    LEASE_TTL,
    OwnCitus,
    pages_at_least,
    pages_since,
    refetch_budget,
    start_w0_and_w1,
    url_nodes,
    web_over_every_citus_shard,
)
from tests.integration.cluster.harness import (
    Cluster,
    OutboxReader,
    check_outbox,
    done,
    stop,
    wait_for,
)

pytestmark = pytest.mark.timeout(900)

#: the Crawl-delay hosts set the crawl's length: about 2.5 requests a page, 1.5 s apart
CRAWL_DELAY = 1.5
PAGES_PER_HOST = 30


async def _rebalance(dsn: str) -> tuple[int, str]:
    """Rebalance by logical replication and wait for it; the shard moves of its job and
    its final state."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SELECT citus_rebalance_start(shard_transfer_mode := 'force_logical')")
        await conn.execute("SELECT citus_rebalance_wait()")
        row = await conn.fetchrow(
            "SELECT state, details FROM citus_rebalance_status() ORDER BY job_id DESC LIMIT 1")
        moves = int(await conn.fetchval(
            "SELECT count(*) FROM pg_dist_background_task t JOIN pg_dist_background_job j"
            " USING (job_id) WHERE j.job_type = 'rebalance'"
            " AND t.command LIKE '%citus_move_shard_placement%'"))
    finally:
        await conn.close()
    return moves, f"{row['state']} {row['details']}"


async def test_a_node_joins_and_shards_move_while_workers_die_and_join(
        crawl_db: OwnCitus, tmp_path: Path) -> None:
    own = crawl_db
    cluster_dir = tmp_path / "crawl"
    cluster_dir.mkdir()
    spec = await web_over_every_citus_shard(own, tmp_path, PAGES_PER_HOST, CRAWL_DELAY)
    async with TestWebServer(spec) as web:
        cluster = Cluster(own.dsn, cluster_dir, web, spec, delay=0.15,
                          extra=["--lease-ttl", LEASE_TTL])
        await cluster.open()
        reading: asyncio.Task[None] | None = None
        try:
            expected = web.web.expected_fetches()
            began = time.monotonic()
            await start_w0_and_w1(cluster, web)
            reader = OutboxReader(cluster)  # sequences and reads events all along
            reading = asyncio.create_task(reader.run())
            await wait_for("a sixth of the crawl",
                           pages_at_least(cluster, len(expected) // 6))
            assert await url_nodes(own.dsn) == 2

            # 1: a third worker node, added and given shards by logical replication
            added_at = time.monotonic()
            node = await asyncio.to_thread(own.cluster.start_worker)
            await own.cluster.add_worker(node, own.name)
            moving_at = time.monotonic()
            read_before = len(reader.events)
            moves, status = await _rebalance(own.dsn)
            moved_at = time.monotonic()
            read_during = len(reader.events) - read_before
            await wait_for("pages fetched after the rebalance",
                           pages_since(cluster, moved_at, 10))

            # 2: w1 killed -9, w2 joins
            victim = cluster.workers["w1"]
            victim.proc.send_signal(signal.SIGKILL)
            await victim.proc.wait()
            killed_at = time.monotonic()
            await cluster.start("w2")
            await wait_for("pages fetched by the newcomer w2",
                           pages_since(cluster, killed_at, 5, "w2"))
            await done(cluster, expected)
            budget = await refetch_budget(cluster, "w0", "w2")
            await stop(cluster)
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading
            await reader.read_once()  # whatever was committed after the last poll
            counts = cluster.page_counts()
            refetched = {u for u, n in counts.items() if n > 1}
            dead = {web.url(r.host, r.path_qs) for r in cluster.requests_by("w1")}
            # a page fetched twice: one the killed worker had fetched, or one a survivor
            # fetched and could not commit (stale) or had cancelled by its self-fence
            others = refetched - dead
            print(f"nodes join: {len(expected)} URLs; node started and added "
                  f"{moving_at - added_at:.1f} s, rebalance of {moves} shard moves "
                  f"{moved_at - moving_at:.1f} s ({status}) at {moving_at - began:.1f} s, "
                  f"{read_during} events sequenced and read meanwhile; "
                  f"w1 killed at {killed_at - began:.1f} s; crawl done at "
                  f"{time.monotonic() - began:.1f} s; {len(refetched)} pages fetched twice "
                  f"({len(others)} not by w1; survivors' stale + fenced {budget})")

            assert expected - cluster.fetched() == set(), "expected pages not fetched"
            await check_outbox(cluster, expected)
            # the outbox as its consumer saw it, read all along: positions dense, the
            # same events as stored, none refused while its shards moved
            refused = [f for f in reader.failures if "replica identity" in f]
            assert refused == [], f"{len(refused)} outbox reads refused, e.g. {refused[:1]}"
            assert read_during > 0, "no event committed and read while the shards moved"
            stored = await cluster.events()
            assert [(e.id, e.url_key, e.version) for e in reader.events] == [
                (e.id, e.url_key, e.version) for e in stored]
            assert [e.id for e in reader.events] == list(range(1, len(reader.events) + 1))
            assert final_event_problems(reader.events, expected) == ([], [], [])
            assert len(others) <= budget, (sorted(others), budget)
            assert cluster.violations() == []
            assert moves >= 1, status
            nodes = await url_nodes(own.dsn)
            assert nodes == 3, f"URL rows on {nodes} of 3 worker nodes"
        finally:
            if reading is not None and not reading.done():
                reading.cancel()
            await cluster.close()
