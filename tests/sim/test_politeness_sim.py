"""The real worker and frontier on small simulated webs, in virtual time: one politeness
rule each (unreachable robots.txt, its recovery, Retry-After, a slowing host, one IP's
cap).

Every run is judged by the independent observer: zero requests over a host's
or an IP's in-flight cap, zero gaps shorter than the delay in force, zero
requests to disallowed paths, during back-off, or while robots.txt is
unreachable; and every allowed URL eventually fetched.

One file of three (with ``test_random_webs_sim.py`` and ``test_large_web_sim.py``, once
one file): ``--dist loadfile`` runs them in different test processes (docs/testing.md,
"The time budget").
"""

from __future__ import annotations

import itertools

from courtier.sim.run import sim_config, simulate
from courtier.sim.web import SimHost, SimWeb
from tests.sim.random_webs import allowed_pages, fetched_pages


def test_unreachable_robots_means_no_page_is_fetched() -> None:
    web = SimWeb([SimHost("down.sim", robots_status=503), SimHost("dead.sim", robots_status=0),
                  SimHost("up.sim", ip="192.0.2.9")])
    report = simulate(web, sim_config(delay=0.5))
    assert report.violations == []
    hosts_with_pages = {r.host for r in report.requests if r.path != "/robots.txt"}
    assert hosts_with_pages == {"up.sim"}
    # the unreachable hosts' URLs are kept for later, not lost
    assert report.status.stop_reason == "nothing due"


def test_robots_recovering_from_503_lets_the_host_be_crawled() -> None:
    web = SimWeb([SimHost("flaky.sim", pages=5, robots_fail_until=300.0)])
    config = sim_config(delay=0.5, continuous=False, max_seconds=4 * 3600.0)
    report = simulate(web, config)
    assert report.violations == []
    robots = [r for r in report.requests if r.path == "/robots.txt"]
    assert [r.status for r in robots][:1] == [503]
    assert robots[-1].status == 200


def test_retry_after_is_obeyed_for_the_whole_host() -> None:
    web = SimWeb([SimHost("busy.sim", pages=30, failure_rate=0.3, retry_after="60")])
    report = simulate(web, sim_config(delay=0.5, max_retries=50))
    assert report.violations == []
    assert allowed_pages(web) <= fetched_pages(report)


def test_a_host_that_slows_down_gets_longer_gaps() -> None:
    web = SimWeb([SimHost("slow.sim", pages=40, latency=0.05, latency_jitter=0.0,
                          slow_after=15, slow_latency=2.0)])
    report = simulate(web, sim_config(delay=0.5))
    pages = sorted((r for r in report.requests if r.path != "/robots.txt"),
                   key=lambda r: r.start)
    gaps = [b.start - a.start for a, b in itertools.pairwise(pages)]
    assert max(gaps[:10]) < 1.5
    assert min(gaps[-10:]) >= 2.0 * 5.0  # adaptive: 5 × a 2 s response time


def test_many_hosts_on_one_ip_share_its_cap() -> None:
    web = SimWeb([SimHost(f"v{i}.sim", ip="192.0.2.50", pages=5) for i in range(30)])
    report = simulate(web, sim_config(delay=0.5, max_in_flight_per_ip=2))
    assert report.violations == []
    events = sorted([(r.start, 1) for r in report.requests]
                    + [(r.end, -1) for r in report.requests])
    peak = level = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    assert peak <= 2
