"""Worker processes joining, dying and pausing while they crawl one test web together.

Judged by the test web's request log (politeness, who fetched what, refetches)
and by store rows (lease owners and their acquisition times, the outbox).

The kill -9 and the join run on plain PostgreSQL and on a database of the session's local
Citus cluster (issue 30: "the 3-worker kill/join tests on Citus"), there with the lease
TTL of :data:`~tests.integration.cluster.harness.CITUS_TTL`. At the 3 s lease of plain
PostgreSQL the join on Citus failed at load 15-17 (its lease rounds took 2-7 s, measured in
the workers: the acquisition's part), with 648 and 3,200 takeovers where none may be; at
load 5-9 it passed 3 of 4 runs and once refetched a page cut by a fence, which the join's
judgement now allows (a refetch after its sender logged a fence or a lost shard).
"""

from __future__ import annotations

import collections
import itertools
import signal
import time
from collections.abc import Awaitable, Callable

import pytest

from courtier.cluster.rendezvous import target_owners
from courtier.core.outcome import FINAL_OUTCOMES
from courtier.core.urls import SHARD_COUNT, canonicalize
from courtier.store.cluster import LeaseRecord
from tests.integration.cluster.harness import (
    TTL,
    Cluster,
    agent_of,
    check_outbox,
    done,
    finish,
    lost_result_times,
    metric_of,
    monotonic_of,
    newcomer_taking,
    start_three,
    stop,
    wait_for,
)

pytestmark = pytest.mark.timeout(600)


# 30 pages a host: the victim must still have 15 requests to make once the first worker
# (started alone, it crawls everything at first) has handed its shards over; at 15 pages
# a host the others could fetch nearly all of them before that
@pytest.mark.parametrize("dsn", ["postgres", "citus"], indirect=True)
@pytest.mark.parametrize("pages_per_host", [30])
async def test_kill_9_of_one_worker_moves_its_shards_and_loses_nothing(cluster: Cluster) -> None:
    expected = cluster.server.web.expected_fetches()
    await start_three(cluster)
    await wait_for("the victim fetching", _has_fetched(cluster, "w1", 15))
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
    assert await _refetches_without_a_lost_result(cluster, "w1") == []
    assert cluster.violations() == []


async def _refetches_without_a_lost_result(cluster: Cluster, dead: str | None
                                           ) -> list[str]:
    """Each page request that the server saw again for the same URL, whose result was not
    lost: a refetch is legitimate only for work whose commit never happened.

    A URL is committed once (its one final event; ``created_at`` is the committing
    worker's clock when it sent the commit, this machine's wall clock): no request for
    it may start after that. Each earlier request's result was lost, by the kill of
    ``dead``, or by a fence or a lost shard of the survivor that sent it, logged by that
    worker before the refetch started: the fence cuts requests still waiting for their
    answer (a new owner's request would overlap them), and a shard lost to another worker
    takes its uncommitted results with it (their commits are refused as stale). Under
    load (10–13) a survivor's own lease lapses and it fences; the test's old bound (only
    the dead worker's URLs refetched, at most as many as it fetched in its last 10 s)
    failed on that legitimate refetch (docs/testing.md). No lower bound on the fence's
    time: the server stamps a request when its handler runs, which on a loaded machine
    can be after the worker sent it and fenced. Whether a fence spares a fetch that has
    its answer is tests/sim/test_store_stall_fence.py's.

    Seen red on a scratch copy that sent every ``/p/3.html`` request twice (the first
    answer thrown away): 5 URLs named, "fetched by w0 at … and again at …". The
    after-the-commit half was not seen red: a copy whose takeovers made the gained
    shards' committed rows due again fetched nothing twice (not followed up)."""
    wall = time.time() - time.monotonic()
    events = await cluster.events()
    committed = {e.payload["url"]: e.created_at - wall for e in events
                 if e.payload["outcome"] in FINAL_OUTCOMES}
    # (a retry's result is committed and its URL fetched again by design)
    retried = {e.payload["url"] for e in events if e.payload["outcome"] not in FINAL_OUTCOMES}
    losses = {w: lost_result_times(cluster.workers[w]) for w in cluster.workers}
    by_url: dict[str, list[tuple[float, str]]] = collections.defaultdict(list)
    for r in cluster.page_log():
        by_url[cluster.server.url(r.host, r.path_qs)].append((r.start, r.user_agent))
    agents = {agent_of(w): w for w in cluster.workers}
    problems = []
    for url, requests in sorted(by_url.items()):
        if url in retried:
            continue
        requests.sort()
        done_at = committed.get(url, float("inf"))
        for (start, agent), (later, _) in itertools.pairwise(requests):
            worker = agents[agent]
            if later > done_at:
                problems.append(f"{url}: fetched at {later:.2f}, after its commit at "
                                f"{done_at:.2f}")
            elif worker != dead and not any(t <= later for t in losses[worker]):
                problems.append(f"{url}: fetched by {worker} at {start:.2f} and again at "
                                f"{later:.2f}, its result lost to no kill, fence or loss")
    return problems


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
    assert await _refetches_without_a_lost_result(cluster, None) == [], (
        "a graceful move refetched")
    await check_outbox(cluster, expected)
    # the newcomer took over hosts others had started: politeness held across the move
    by_host = collections.defaultdict(set)
    for r in cluster.page_log():
        by_host[r.host].add(r.user_agent)
    assert any(len(agents) > 1 for agents in by_host.values())
    assert cluster.requests_by(newcomer)
    assert cluster.violations() == []


# 30 pages a host, the size it has passed at (with 15, the woken worker once hung in its
# graceful stop: a worker bug also seen at 30 in test_ip_cap; see docs/testing.md)
@pytest.mark.parametrize("pages_per_host", [30])
async def test_a_stopped_worker_sends_nothing_after_its_fence_deadline(
        cluster: Cluster) -> None:
    expected = cluster.server.web.expected_fetches()
    await start_three(cluster)
    await wait_for("the sleeper fetching", _has_fetched(cluster, "w1", 15))
    sleeper = cluster.workers["w1"]
    sleeper.proc.send_signal(signal.SIGSTOP)
    stopped_at = time.monotonic()

    async def taken_and_paused() -> bool:
        owners = await cluster.owners()
        return ("w1" not in owners.values()
                and time.monotonic() >= stopped_at + 2 * TTL)

    await wait_for("its shards taken over, twice the TTL paused", taken_and_paused)
    sleeper.proc.send_signal(signal.SIGCONT)

    async def back() -> bool:
        return "w1" in (await cluster.owners()).values()

    await wait_for("the woken worker given shards again", back)
    view = await cluster.view()
    regained = monotonic_of(min(x.acquired_at for x in view.leases if x.owner == "w1"))
    await done(cluster, expected)
    stale = await metric_of(sleeper, "courtier_stale_commits_total")
    fenced = await metric_of(sleeper, "courtier_fenced_requests_total")
    drained = await metric_of(sleeper, "courtier_drain_cancelled_requests_total")
    await stop(cluster)

    # its last renewal was before the stop, so it fenced itself by then at the latest
    fence_by = stopped_at + TTL * (1 - 0.001) - TTL / 4
    late = [r for r in cluster.requests_by("w1") if fence_by <= r.start < regained]
    assert late == []
    assert expected - cluster.fetched() == set()
    await check_outbox(cluster, expected)
    assert cluster.violations() == []
    # whatever it had not committed when stopped was fetched again by the others; each of
    # those results was refused by the store (stale) or its fetch cancelled (fenced), or,
    # before the stop, cut by a handover's drain timeout (the workers start one after the
    # other, so it hands shards over to the third). Before the drain cuts were counted, a
    # run at load 10-18 failed with 6 hosts' "/" refetched against 4 stale and 0 fenced:
    # first pages, fetched while the shards were being spread (the log was not kept, so
    # the drain is the likely cause, not a proven one)
    mine: dict[str, float] = {}
    again = set()
    for r in sorted(cluster.log(), key=lambda r: r.start):
        url = cluster.server.url(r.host, r.path_qs)
        if r.user_agent == agent_of("w1") and r.start < stopped_at:
            mine[url] = r.start
        elif url in mine and r.user_agent != agent_of("w1"):
            again.add(url)
    # (only fetches that count once: a URL with one event was fetched twice for one cycle;
    # retries and robots.txt re-checks are fetched again by design)
    events = collections.Counter(e.payload["url"] for e in await cluster.events())
    again = {u for u in again if events[u] == 1}
    assert stale + fenced + drained >= len(again), (stale, fenced, drained, sorted(again))
    print(f"sleeper: {stale} stale commits, {fenced} fenced, {len(again)} refetched by others")


def _has_fetched(cluster: Cluster, worker_id: str, n: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return len(cluster.requests_by(worker_id)) >= n
    return check
