"""A worker killed -9 while three crawl one test web: its shards are owned again in one
round of the survivors once they are free, and nothing is lost or fetched twice without a
lost result.

Judged by the test web's request log (politeness, who fetched what, refetches) and by
store rows (lease owners, their expiry and acquisition times, the outbox).

The test runs on plain PostgreSQL and on the process's database of the session's local
Citus cluster (issue 30: "the 3-worker kill/join tests on Citus"), there with the lease
TTL of :data:`~tests.integration.cluster.harness.CITUS_TTL`.

Once ``test_crash_and_join.py`` with the join (``test_worker_join.py``) and the pause
(``test_worker_pause.py``): one file a scenario, so that ``--dist loadfile`` runs them in
different test processes (docs/testing.md, "The time budget").
"""

from __future__ import annotations

import collections
import signal

import pytest

from courtier.store.cluster import LeaseRecord
from tests.integration.cluster.harness import (
    Cluster,
    check_outbox,
    finish,
    has_fetched,
    start_three,
    wait_for,
)
from tests.integration.cluster.refetches import refetches_without_a_lost_result

pytestmark = pytest.mark.timeout(600)


# 30 pages a host: the victim must still have 15 requests to make once the first worker
# (started alone, it crawls everything at first) has handed its shards over; at 15 pages
# a host the others could fetch nearly all of them before that
@pytest.mark.parametrize("dsn", ["postgres", "citus"], indirect=True)
@pytest.mark.parametrize("pages_per_host", [30])
async def test_kill_9_of_one_worker_moves_its_shards_and_loses_nothing(cluster: Cluster) -> None:
    expected = cluster.server.web.expected_fetches()
    await start_three(cluster)
    await wait_for("the victim fetching", has_fetched(cluster, "w1", 15))
    before = await cluster.view()
    victim = {lease.shard for lease in before.leases if lease.owner == "w1"}
    cluster.workers["w1"].proc.send_signal(signal.SIGKILL)
    await cluster.workers["w1"].proc.wait()

    # Watch the store's rows until every shard of the dead worker is owned again: the
    # last expiry of each of its leases (a renewal in flight at the kill may still land,
    # and it stays visible until it expires, so polling sees it) and every heartbeat of
    # the survivors (each coordinator round heartbeats first; a missed one only makes
    # the count below smaller)
    last_expiry = {s: lease.expires_at for s, lease in
                   ((x.shard, x) for x in before.leases) if s in victim}
    heartbeats: dict[str, set[float]] = collections.defaultdict(set)

    async def taken_over() -> bool:
        view = await cluster.view()
        for lease in view.leases:
            if lease.shard in victim and lease.owner == "w1":
                last_expiry[lease.shard] = max(last_expiry[lease.shard], lease.expires_at)
        for worker in view.workers:
            heartbeats[worker.worker_id].add(worker.heartbeat_at)
        owners = await cluster.owners()
        return all(owners.get(s) in ("w0", "w2") for s in victim)

    await wait_for("the victim's shards owned again", taken_over)
    view = await cluster.view()
    after = {lease.shard: lease for lease in view.leases}
    dead_heartbeat = max(w.heartbeat_at for w in view.workers if w.worker_id == "w1")
    _check_takeover(victim, after, last_expiry, dead_heartbeat, heartbeats, cluster.lease_ttl)
    assert all(after[s].epoch > {x.shard: x for x in before.leases}[s].epoch for s in victim)
    await finish(cluster, expected)

    assert expected - cluster.fetched() == set()
    await check_outbox(cluster, expected)
    assert await refetches_without_a_lost_result(cluster, "w1") == []
    assert cluster.violations() == []


#: rounds of the new owner's coordinator a dead worker's shard may stay unowned after it
#: became free: the round that takes it, plus two that fail (a store call timing out on a
#: busy machine fails its round after the heartbeat)
FREE_ROUNDS = 3


def _check_takeover(victim: set[int], after: dict[int, LeaseRecord],
                    last_expiry: dict[int, float], dead_heartbeat: float,
                    heartbeats: dict[str, set[float]], ttl: float) -> None:
    """The takeover of a dead worker's shards, judged on the store's own clock and the new
    owners' own rounds, never on the test's wall clock (a busy machine slows the rounds, not
    the judgement).

    A shard is free to take once its lease expired *and* its owner's heartbeat is older
    than the worker TTL (until then the dead worker is still every survivor's rendezvous
    target): ``free_at = max(last expiry, last heartbeat + TTL)``. Then, for every shard:
    the new lease was acquired no earlier than the old one expired (no two owners), and
    the new owner's coordinator heartbeat at most ``FREE_ROUNDS`` times between ``free_at``
    and its acquisition (a round that heartbeats after ``free_at`` reads a view in which the
    shard is free, so it takes it: one round is what a correct coordinator needs).

    The old assertion (every new lease within TTL + 5 s of the test's kill, wall clock) is
    gone: it measured the machine's load as much as the cluster. Seen red on a scratch
    copy: with ``plan_shards`` counting a worker live for three worker TTLs instead of one
    (a slow takeover), "shard 2 stayed unowned for 11 rounds of w2". The first assertion
    (no takeover before expiry) is guarded by the store's SQL (``courtier_acquire_shards``,
    a migration); it was not broken here.
    """
    for shard in sorted(victim):
        lease = after[shard]
        assert lease.acquired_at >= last_expiry[shard], (
            f"shard {shard} taken by {lease.owner} at {lease.acquired_at:.3f}, before the dead "
            f"worker's lease expired at {last_expiry[shard]:.3f} (store clock)")
        free_at = max(last_expiry[shard], dead_heartbeat + ttl)
        assert lease.owner is not None
        rounds = sorted(h for h in heartbeats[lease.owner] if free_at < h <= lease.acquired_at)
        assert len(rounds) <= FREE_ROUNDS, (
            f"shard {shard} stayed unowned for {len(rounds)} rounds of {lease.owner} after it "
            f"became free at {free_at:.3f}: heartbeats {rounds}")
    worst = max(after[s].acquired_at - max(last_expiry[s], dead_heartbeat + ttl) for s in victim)
    print(f"takeover after kill: every shard owned again at most {worst:.2f} s (store clock) "
          "after it became free")
