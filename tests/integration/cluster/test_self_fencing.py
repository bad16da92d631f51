"""Self-fencing with real processes: a worker stopped (SIGSTOP) while a response it waits
for is held open by the test web, and woken (SIGCONT) after its shards were taken over,
has that response and its whole queue ready at once; after its fence deadline the test
web sees no request from it until it holds shards again.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable

import asyncpg
import pytest

from courtier.core.urls import canonicalize
from courtier.testweb.server import politeness_violations
from tests.integration.cluster.harness import TTL, Cluster, agent_of, stop, wait_for

pytestmark = pytest.mark.timeout(600)

#: seconds the woken worker is watched while it cannot reach its coordinator's store
WINDOW = 3.0


async def _watch(seconds: float, check: Callable[[], Awaitable[bool]]) -> bool:
    """Poll ``check`` for ``seconds``; True as soon as it holds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        if await check():
            return True
        await asyncio.sleep(0.05)
    return False


def _sent_after(cluster: Cluster, worker_id: str,
                after: float) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return any(r.start >= after for r in cluster.requests_by(worker_id))
    return check


@pytest.mark.parametrize("pages_per_host", [30])
async def test_a_woken_worker_with_requests_ready_sends_none_after_its_fence(
        cluster: Cluster) -> None:
    """The sleeper (w1) is stopped while the test web holds one of its requests open, and
    once its shards are taken over its heartbeat is made to wait on a row lock (so it
    cannot learn of the takeover when it wakes); the held answer is sent after the
    SIGCONT, and every host of its queue is long due by then. The lock stays until the
    held request has ended and a window of ``WINDOW`` seconds has passed: a correct
    worker sends nothing however long it is.

    Seen red on a scratch copy with self-fencing off (``ShardCoordinator.may_start``
    always true and ``_fence_reached`` doing nothing), in 3 runs of 4: e.g. "h08…/p/1.html
    6.32 s after the stop" (4 requests after the fence). Passed once: that run's woken
    worker failed its first store calls (a refill on a connection whose transaction the
    server had ended: "another operation is in progress", docs/testing.md) and reset its
    queue, so it had nothing to send. Before the row lock, the woken worker's coordinator
    learnt of the takeover within 0.1 s and the test passed with self-fencing off. Since
    migration 0039 (the lease in the ``workers`` row) the lock is taken after the takeover
    and before the SIGCONT (taken before the stop, it kept the lease looking live); red
    again with self-fencing off, 3 runs of 3 (``late`` not empty).
    """
    server = cluster.server
    await cluster.start("w0", *server.web.seeds())
    await cluster.start("w1")

    async def both_crawling() -> bool:
        owners = set((await cluster.owners()).values())
        pages = [r for r in cluster.requests_by("w1") if not r.path_qs.startswith("/robots")]
        return owners == {"w0", "w1"} and len(pages) >= 5

    await wait_for("both workers crawling", both_crawling)
    owners = await cluster.owners()
    # a host of the sleeper's with pages still to fetch (its most recent page request)
    host = next(r.host for r in reversed(cluster.requests_by("w1"))
                if not r.path_qs.startswith("/robots")
                and owners.get(canonicalize(server.url(r.host, "/")).shard) == "w1")
    held = server.hold_next(host)
    await held.arrived.wait()
    assert held.user_agent == agent_of("w1")
    sleeper = cluster.workers["w1"]
    sleeper.proc.send_signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    # its last renewal was before, so it fenced itself by then at the latest
    fence_by = stopped_at + TTL * (1 - 0.001) - TTL / 4

    async def taken_and_paused() -> bool:
        return ("w1" not in (await cluster.owners()).values()
                and time.monotonic() >= stopped_at + 2 * TTL)

    await wait_for("its shards taken over, twice the TTL paused", taken_and_paused)
    # its store then stops answering its coordinator: the heartbeat waits on a lock of its
    # own ``workers`` row (the other worker's row is free), so until the lock goes the
    # woken sleeper cannot learn of the takeover, and only self-fencing keeps it quiet. The
    # lock comes after the takeover: the row holds the sleeper's lease too (migration
    # 0039), and a taker leaves the shards of a locked lease row alone (it is being renewed)
    lock = await asyncpg.connect(cluster.dsn, timeout=30)
    watch = await asyncpg.connect(cluster.dsn, timeout=30)
    try:
        async with lock.transaction():
            await lock.execute("SELECT 1 FROM workers WHERE worker_id = 'w1' FOR UPDATE")
            blocker = await lock.fetchval("SELECT pg_backend_pid()")

            async def heartbeat_waiting() -> bool:
                return bool(await watch.fetchval(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE $1 = ANY(pg_blocking_pids(pid))", blocker))

            sleeper.proc.send_signal(signal.SIGCONT)
            held.release()  # the answer it waited for, after the SIGCONT
            await wait_for("the woken sleeper's heartbeat waiting", heartbeat_waiting)

            async def held_request_ended() -> bool:
                return any(r.end > fence_by and r.user_agent == agent_of("w1")
                           for r in server.requests_for(host))

            await wait_for("the held request ended (answered or cut)", held_request_ended)
            # a window (not a bound: a correct worker sends nothing however long it is)
            # in which a worker that did not fence itself sends what it has ready
            await _watch(WINDOW, _sent_after(cluster, "w1", fence_by))
    finally:
        await lock.close()
        await watch.close()

    async def back() -> bool:
        return "w1" in (await cluster.owners()).values()

    await wait_for("the woken worker given shards again", back)
    view = await cluster.view()
    regained = min(x.acquired_at for x in view.leases if x.owner == "w1")
    regained_mono = regained - (time.time() - time.monotonic())
    await stop(cluster)

    late = [f"{r.host}{r.path_qs} {r.start - stopped_at:.2f} s after the stop"
            for r in cluster.requests_by("w1") if fence_by <= r.start < regained_mono]
    assert late == []
    # politeness, but for the held request: held past the TTL on purpose, it overlaps the
    # new owner's requests to its host (which waited a delay from its takeover)
    kept = [r for r in cluster.log()
            if not (r.host == host and r.user_agent == agent_of("w1") and r.end > fence_by)]
    host_delays = {h.name: max(cluster.delay, h.crawl_delay)
                   for h in cluster.spec.of_kind("crawl_delay")}
    assert politeness_violations(kept, delay=cluster.delay, max_in_flight=1,
                                 host_delays=host_delays) == []
