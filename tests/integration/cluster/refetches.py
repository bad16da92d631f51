"""Which page requests the test web saw again without a lost result: the judgement of
refetches shared by the kill and join tests (``test_worker_kill.py``,
``test_worker_join.py``)."""

from __future__ import annotations

import collections
import itertools
import time

from courtier.core.outcome import FINAL_OUTCOMES
from tests.integration.cluster.harness import Cluster, agent_of, lost_result_times


async def refetches_without_a_lost_result(cluster: Cluster, dead: str | None
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
