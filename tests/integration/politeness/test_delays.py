"""Crawl-delay and the per-IP cap on a real socket, judged from the server's log."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from courtier.testweb import (
    HostSpec,
    RequestRecord,
    TestWebServer,
    WebSpec,
    default_web,
    max_overlap,
    politeness_violations,
)
from tests.integration.politeness.helpers import (
    SCHEMES,
    host_log,
    run_crawl,
    served_over,
    start_gaps,
)

DELAY = 0.1
TOLERANCE = 0.01


@pytest.mark.timeout(60)
@pytest.mark.parametrize("scheme", SCHEMES)
async def test_crawl_delay_is_honoured_exactly(tmp_path: Path, scheme: str) -> None:
    """Over plain HTTP and over HTTPS (issue 31; the HTTPS run seen red with --ca-file
    left out: every handshake refused, no request in the server's log)."""
    crawl_delay = 0.7  # fractional on purpose: neither rounded up nor down
    spec = HostSpec("cd.test", pages=3, robots="crawl_delay", crawl_delay=crawl_delay)
    web = WebSpec(hosts=[spec])
    server_tls, crawl_tls = served_over(scheme, web, tmp_path)
    async with TestWebServer(web, **server_tls) as server:  # type: ignore[arg-type]
        assert server.web.seeds()[0].startswith(f"{scheme}://")
        body = server.web.page("cd.test", "/robots.txt").body
        await asyncio.wait_for(run_crawl(server, tmp_path / "d", delay=DELAY, max_pages=5,
                                         **crawl_tls), 60)
        log = host_log(server.log, "cd.test")
    assert b"Crawl-delay: 0.7\n" in body
    assert log[0].path_qs == "/robots.txt" and len(log) == 6
    gaps = start_gaps(log)
    # from the robots.txt fetch on, every start is at least Crawl-delay after the last
    assert min(gaps) >= crawl_delay - TOLERANCE, gaps
    # ...and Crawl-delay is what sets the pace, not the 0.1 s delay (an upper bound on the
    # gaps would break on a loaded machine; the value parsed is checked in the unit tests)
    assert politeness_violations(log, delay=crawl_delay, max_in_flight=1) == []


async def crawl_shared_ip(data: Path, per_ip: int) -> tuple[list[RequestRecord], dict[str, float]]:
    """Six hosts, all on 127.0.0.1, with a little latency so that requests can overlap."""
    spec = default_web(n_hosts=6, pages_per_host=3, crawl_delay=0.2, latency=0.05, seed=5)
    async with TestWebServer(spec) as server:
        await asyncio.wait_for(
            run_crawl(server, data, max_in_flight_per_ip=per_ip, max_pages=40), 60
        )
        slow = {h.name: h.crawl_delay for h in spec.of_kind("crawl_delay")}
        return list(server.log), slow


@pytest.mark.timeout(60)
async def test_per_ip_cap_holds_across_hosts(tmp_path: Path) -> None:
    log, host_delays = await crawl_shared_ip(tmp_path / "d", per_ip=2)
    assert len({r.host for r in log}) == 6
    assert max_overlap(log) == 2  # the cap is reached, never passed
    assert politeness_violations(log, DELAY, 1, host_delays=host_delays) == []


@pytest.mark.timeout(60)
async def test_without_the_per_ip_cap_the_same_crawl_overlaps_more(tmp_path: Path) -> None:
    # shows the test web can make more than two requests overlap: the cap test is not vacuous
    log, host_delays = await crawl_shared_ip(tmp_path / "d", per_ip=0)
    assert max_overlap(log) > 2
    assert politeness_violations(log, DELAY, 1, host_delays=host_delays) == []
