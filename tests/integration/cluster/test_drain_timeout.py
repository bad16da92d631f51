"""The drain timeout of a graceful handover: a response the test web holds open longer
than the drain timeout does not hold the handover up, and its URL is not lost.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from courtier.core.urls import canonicalize
from courtier.testweb.killloop import final_event_problems
from courtier.testweb.spec import HostSpec, WebSpec
from tests.integration.cluster.harness import (
    Cluster,
    agent_of,
    metric_of,
    newcomer_taking,
    serving,
    stop,
    wait_for,
)

pytestmark = pytest.mark.timeout(300)

HOST = "held.test"


@pytest.fixture
async def cluster(dsn: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with serving(dsn, tmp_path, WebSpec(hosts=[HostSpec(HOST, pages=12)])) as cluster:
        yield cluster


async def test_a_held_response_does_not_hold_up_a_handover(cluster: Cluster) -> None:
    """The old owner's request is held open (never answered) while a newcomer joins and
    the host's shard is handed over: after the drain timeout (a quarter of the lease TTL)
    the old owner cuts it, the handover completes, and the newcomer fetches the held URL
    and commits its final event.

    Seen red on a scratch copy with the drain never timing out (``ShardKeeper`` with
    ``drain_timeout`` infinite): the handover then waited for the header timeout (30 s),
    and the held URL's first event was a failure, ``(None, 'timeout')``, before the
    newcomer's ``(200, None)``.
    """
    server = cluster.server
    newcomer = newcomer_taking({canonicalize(server.url(HOST, "/")).shard}, ("w0",))
    await cluster.start("w0", *server.web.seeds())

    async def w0_under_way() -> bool:  # robots.txt and the index: its links are queued
        return len(cluster.requests_by("w0")) >= 2

    await wait_for("w0 fetching the host", w0_under_way)
    held = server.hold_next(HOST)
    await held.arrived.wait()
    assert held.user_agent == agent_of("w0")
    held_url = server.url(HOST, held.target)
    await cluster.start(newcomer)

    async def fetched_again() -> bool:
        return any(r.path_qs == held.target for r in cluster.requests_by(newcomer))

    await wait_for("the held URL fetched by the newcomer", fetched_again)
    assert held.cut, "the held request was answered: nothing but the drain may end it"

    async def final_event() -> bool:
        without, _, _ = final_event_problems(await cluster.events(), {held_url})
        return not without

    await wait_for("the held URL's final event", final_event)
    # the cut is counted once and logged (the cluster tests' refetch judgement reads it)
    assert await metric_of(cluster.workers["w0"], "courtier_drain_cancelled_requests_total") == 1
    assert "handover drain timed out: cancelled 1 requests" in \
        cluster.workers["w0"].stderr.read_text(errors="replace")
    await stop(cluster)
    events = [e.payload for e in await cluster.events() if e.payload["url"] == held_url]
    # one event, the newcomer's answer, whatever the page answers (the held link may be a
    # redirect: a 301 was seen): the cut was no failure (a fetch that ran into its header
    # timeout would have been one, with error_kind 'timeout', retried later)
    assert len(events) == 1, events
    assert events[0].get("status") is not None and events[0].get("error_kind") is None, events
    # the newcomer's request came after the old one ended (the cut), one at a time
    cut = next(r for r in server.requests_for(HOST)
               if r.path_qs == held.target and r.user_agent == agent_of("w0"))
    again = min(r.start for r in cluster.requests_by(newcomer) if r.path_qs == held.target)
    assert cut.end <= again
    assert cluster.violations() == []
