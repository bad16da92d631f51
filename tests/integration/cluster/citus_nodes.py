"""A Citus cluster of a test's own under a crawl of two or three ``courtier worker``
processes: the pieces the node tests share (``test_citus_node_join.py``,
``test_citus_node_stop.py``; two files so that the test processes run them side by side).
Their fixtures, ``own_citus`` (a coordinator and two worker nodes, started per test;
the session's ``citus`` fixture is not touched) and ``crawl_db``, are in conftest.py.
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from courtier.cluster.rendezvous import target_owners
from courtier.core.clock import RealClock
from courtier.core.urls import SHARD_COUNT, shard_of
from courtier.store.open import make_store
from courtier.testweb.server import TestWebServer
from courtier.testweb.spec import WebSpec, default_web, host_name
from tests.citus_cluster import CitusCluster
from tests.integration.cluster.harness import Cluster, metric_of, wait_for

#: as test_citus_crawl.py: a lease round on Citus writes reference tables by two-phase
#: commit on every node; 3 s leases lapse on the loaded machine
LEASE_TTL = "10"
N_HOSTS = 12
WORKERS = ("w0", "w1", "w2")


@dataclass
class OwnCitus:
    cluster: CitusCluster
    name: str  # the crawl's database
    dsn: str


async def citus_shard_of(dsn: str) -> dict[int, int]:
    """courtier shard → the Citus shard of ``urls`` that holds it (the schema is made)."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT s, get_shard_id_for_distribution_column('urls', s) AS id"
            " FROM generate_series(0, $1 - 1) AS s", SHARD_COUNT)
    finally:
        await conn.close()
    return {int(r["s"]): int(r["id"]) for r in rows}


def domain_over_every_citus_shard(citus_shard: dict[int, int]) -> str:
    """A domain whose hosts fill every Citus shard of ``urls`` (so whichever the rebalance
    moves, URL rows move with it) and give each of w0, w1, w2 at least two hosts."""
    owners = target_owners(range(SHARD_COUNT), dict.fromkeys(WORKERS, 1.0))
    every = set(citus_shard.values())
    for k in range(5000):
        domain = f"n{k}.courtier.test"
        shards = [shard_of(host_name(i, domain)) for i in range(N_HOSTS)]
        per_worker = collections.Counter(owners[s] for s in shards)
        if {citus_shard[s] for s in shards} == every and \
                min(per_worker[w] for w in WORKERS) >= 2:
            return domain
    raise AssertionError("no domain fills every Citus shard")


async def url_nodes(dsn: str) -> int:
    """How many Citus nodes hold URL rows (as test_citus_crawl.py counts them)."""
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(
            "SELECT count(DISTINCT n.nodeid) FROM (SELECT DISTINCT shard FROM urls) AS s"
            " JOIN pg_dist_placement p"
            "   ON p.shardid = get_shard_id_for_distribution_column('urls', s.shard)"
            " JOIN pg_dist_node n ON n.groupid = p.groupid"))
    finally:
        await conn.close()


async def refetch_budget(cluster: Cluster, *worker_ids: str) -> int:
    """Fetches of live workers that a second fetch may repeat by design: results the
    store refused as stale (the shard's epoch moved on) and fetches cancelled by a
    self-fence (already sent, never committed). Read from their /metrics before they
    stop."""
    total = 0.0
    for worker_id in worker_ids:
        worker = cluster.workers[worker_id]
        total += await metric_of(worker, "courtier_stale_commits_total")
        total += await metric_of(worker, "courtier_fenced_requests_total")
    return int(total)


def pages_at_least(cluster: Cluster, n: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return len(cluster.page_log()) >= n
    return check


def pages_since(cluster: Cluster, since: float, n: int,
                 worker_id: str | None = None) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        pages = [r for r in cluster.page_log() if r.start > since
                 and (worker_id is None or r.user_agent.endswith(f" {worker_id})"))]
        return len(pages) >= n
    return check


async def web_over_every_citus_shard(own: OwnCitus, tmp_path: Path, pages_per_host: int,
                                      crawl_delay: float) -> WebSpec:
    """The crawl's schema created (distributed) and a test web whose hosts fill every
    Citus shard of ``urls`` (so whichever shard groups move carry URL rows)."""
    schema = make_store(own.dsn, tmp_path / "schema", RealClock())
    await schema.open()  # the schema, distributed, so the test can read its placement
    await schema.close()
    return default_web(n_hosts=N_HOSTS, pages_per_host=pages_per_host,
                       crawl_delay=crawl_delay, latency=0.02,
                       domain=domain_over_every_citus_shard(await citus_shard_of(own.dsn)))


async def start_w0_and_w1(cluster: Cluster, web: TestWebServer) -> None:
    """w0 with the seeds, then w1; return once the two own every shard between them."""
    await cluster.start("w0", *web.web.seeds())
    await cluster.start("w1")

    async def both_own_shards() -> bool:
        owners = await cluster.owners()
        return len(owners) == SHARD_COUNT and set(owners.values()) == {"w0", "w1"}

    await wait_for("w0 and w1 owning every shard", both_own_shards)
