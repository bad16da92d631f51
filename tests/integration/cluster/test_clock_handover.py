"""A host's politeness clock crosses a graceful handover: real ``courtier worker``
processes on PostgreSQL and one test host whose Crawl-delay (3 s) is longer than a
handover takes, judged from the gaps in the test web's own request log.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from courtier.core.urls import canonicalize
from courtier.testweb.server import RequestRecord, politeness_violations
from courtier.testweb.spec import HostSpec, WebSpec
from tests.integration.cluster.harness import (
    Cluster,
    agent_of,
    newcomer_taking,
    serving,
    stop,
    wait_for,
)

pytestmark = pytest.mark.timeout(300)

CRAWL_DELAY = 3.0
HOST = "slow.test"
TOLERANCE = 0.01


@pytest.fixture
async def cluster(dsn: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with serving(dsn, tmp_path, WebSpec(hosts=[HostSpec(HOST, pages=12, robots="crawl_delay",
                                   crawl_delay=CRAWL_DELAY)])) as cluster:
        yield cluster


def short_gaps(requests: list[RequestRecord], delay: float) -> list[str]:
    """Consecutive requests (one at a time) whose gap from the end of one to the start of
    the next, as the server saw them, is shorter than ``delay``: the crawler counts its
    delay from the end of a fetch, which it sees after the server's end."""
    ordered = sorted(requests, key=lambda r: r.start)
    return [f"{b.path_qs} by {b.user_agent} {b.start - a.end:.3f} s after the end of"
            f" {a.path_qs} by {a.user_agent}"
            for a, b in itertools.pairwise(ordered)
            if b.start - a.end < delay - TOLERANCE]


async def test_the_host_clock_crosses_a_graceful_handover(cluster: Cluster) -> None:
    """The test web holds the old owner's request to the host open, a newcomer joins, and
    the old owner's drain cancels that fetch after the drain timeout: the request ends
    (as the server and the old owner see it) during the handover, so the handover that
    follows (clock saved, release, the newcomer's round, its refill) takes well under the
    Crawl-delay, and a new owner that ignored the saved clock would start its first
    request about a second after that end. Every gap, across the move too, is ≥ 3 s.

    Seen red on a scratch copy with ``restore_clock`` ignoring ``next_start_at``
    (host_clocks.py), 2 runs of 2: "/img/0.png by … w30 1.174 s after the end of /img/0.png by
    … w0" (the cut URL fetched again at once). Green with ``ShardKeeper.restore_host_clocks``
    doing nothing: the host's registration then waits a delay from that moment (slower,
    still polite).
    """
    server = cluster.server
    shard = canonicalize(server.url(HOST, "/")).shard
    newcomer = newcomer_taking({shard}, ("w0",))
    await cluster.start("w0", *server.web.seeds())

    def requests(worker_id: str) -> list[RequestRecord]:
        return [r for r in server.requests_for(HOST) if r.user_agent == agent_of(worker_id)]

    async def w0_under_way() -> bool:  # robots.txt and the index: its links are queued
        return len(requests("w0")) >= 2

    await wait_for("w0 fetching the host", w0_under_way)
    held = server.hold_next(HOST)
    await held.arrived.wait()
    assert held.user_agent == agent_of("w0")
    await cluster.start(newcomer)

    async def newcomer_fetching() -> bool:
        return len(requests(newcomer)) >= 2

    await wait_for("the newcomer fetching the host", newcomer_fetching)
    assert held.cut, "the old owner's drain did not cancel the held fetch"
    await stop(cluster)

    log = server.requests_for(HOST)
    mine, theirs = requests("w0"), requests(newcomer)
    assert max(r.start for r in mine) < min(r.start for r in theirs), "the host moved back"
    last_of_w0 = max(mine, key=lambda r: r.start)
    first_of_newcomer = min(theirs, key=lambda r: r.start)
    print(f"across the move: {first_of_newcomer.start - last_of_w0.end:.2f} s from the end of"
          f" w0's last request to the start of {newcomer}'s first")
    assert short_gaps(log, CRAWL_DELAY) == []
    assert politeness_violations(log, delay=CRAWL_DELAY, max_in_flight=1) == []
