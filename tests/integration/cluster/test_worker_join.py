"""A fourth worker joining three that crawl one test web: a quarter of the shards move to
it, every one by graceful handover, none to an old worker, and politeness holds across
the move.

Judged by the test web's request log and by store rows (owners, handover counters, the
outbox).

The test runs on plain PostgreSQL and on the process's database of the session's local
Citus cluster (issue 30: "the 3-worker kill/join tests on Citus"), there with the lease
TTL of :data:`~tests.integration.cluster.harness.CITUS_TTL`. At the 3 s lease of plain
PostgreSQL the join on Citus failed at load 15-17 (its lease rounds took 2-7 s, measured
in the workers: the acquisition's part), with 648 and 3,200 takeovers where none may be;
at load 5-9 it passed 3 of 4 runs and once refetched a page cut by a fence, which the
judgement now allows (a refetch after its sender logged a fence or a lost shard).
"""

from __future__ import annotations

import collections
import time

import pytest

from courtier.cluster.rendezvous import target_owners
from courtier.core.urls import SHARD_COUNT, canonicalize
from tests.integration.cluster.harness import (
    Cluster,
    check_outbox,
    finish,
    newcomer_taking,
    start_three,
    wait_for,
)
from tests.integration.cluster.refetches import refetches_without_a_lost_result

pytestmark = pytest.mark.timeout(600)


# the web of 30 pages a host: a host the newcomer takes must still have pages to fetch
# when the join settles, even the hosts at --delay (half a Crawl-delay host's time)
@pytest.mark.parametrize("dsn", ["postgres", "citus"], indirect=True)
@pytest.mark.parametrize("pages_per_host", [30])
async def test_a_fourth_worker_takes_a_quarter_of_the_shards_gracefully(
        cluster: Cluster) -> None:
    expected = cluster.server.web.expected_fetches()
    await start_three(cluster)

    async def settled(ids: tuple[str, ...]) -> bool:
        targets = target_owners(range(SHARD_COUNT), {i: 1.0 for i in ids})
        return await cluster.owners() == targets

    await wait_for("three workers owning their rendezvous targets",
                   lambda: settled(("w0", "w1", "w2")))
    # every host with pages to fetch started, so a host that moves is one its old owner
    # was crawling (a robots.txt of 500 keeps its host's pages out of the oracle)
    hosts = {canonicalize(url).host for url in expected}
    async def every_host_started() -> bool:
        return hosts <= {r.host for r in cluster.page_log()}

    await wait_for("every host under way", every_host_started)
    # (a dozen hosts all miss a quarter of the shards a few % of the time)
    newcomer = newcomer_taking({canonicalize(url).shard for url in expected},
                               ("w0", "w1", "w2"))
    before = await cluster.owners()
    joined_at = time.monotonic()
    await cluster.start(newcomer)
    await wait_for("four workers owning their rendezvous targets",
                   lambda: settled(("w0", "w1", "w2", newcomer)))
    after = await cluster.owners()
    moved = {s for s in before if after[s] != before[s]}
    print(f"join settled: {len(moved)} shards moved to the newcomer "
          f"{time.monotonic() - joined_at:.2f} s after it was started")
    assert {after[s] for s in moved} == {newcomer}, "a shard moved to an old worker"
    assert 0.15 <= len(moved) / SHARD_COUNT <= 0.35, len(moved)
    view = await cluster.view()
    assert view.handovers.get("graceful", 0) >= len(moved)
    assert view.handovers.get("takeover", 0) == 0
    await finish(cluster, expected)

    # a page fetched again only after its sender fenced or lost a shard (a lease round late
    # on a busy machine, most often on Citus: at-least-once, not the handover's doing)
    assert await refetches_without_a_lost_result(cluster, None) == [], (
        "a graceful move refetched")
    await check_outbox(cluster, expected)
    # the newcomer took over hosts others had started: politeness held across the move
    by_host = collections.defaultdict(set)
    for r in cluster.page_log():
        by_host[r.host].add(r.user_agent)
    assert any(len(agents) > 1 for agents in by_host.values())
    assert cluster.requests_by(newcomer)
    assert cluster.violations() == []
