"""The real worker and frontier on a simulated web, in virtual time.

Every run is judged by the independent observer: zero requests over a host's
or an IP's in-flight cap, zero gaps shorter than the delay in force, zero
requests to disallowed paths, during back-off, or while robots.txt is
unreachable; and every allowed URL eventually fetched.
"""

from __future__ import annotations

import itertools
import random

import pytest

from courtier.sim.run import sim_config, simulate
from courtier.sim.web import SimHost, SimWeb


def fetched_pages(report: object) -> set[tuple[str, str]]:
    return {(r.host, r.path) for r in report.requests  # type: ignore[attr-defined]
            if r.path != "/robots.txt" and r.status == 200}


def allowed_pages(web: SimWeb, skip_robots_blocked: bool = True) -> set[tuple[str, str]]:
    out = set()
    for host in web.hosts:
        if host.robots_status >= 500 or host.robots_status == 0:
            continue
        out.add((host.name, "/"))
        out.update((host.name, f"/p/{i}") for i in range(host.pages))
    return out


def random_web(seed: int, n_hosts: int) -> SimWeb:
    rng = random.Random(seed)
    hosts = []
    for i in range(n_hosts):
        kind = rng.random()
        ip = f"192.0.2.{i % max(1, n_hosts // 4)}"  # several hosts per IP
        robots_status = 200
        if kind < 0.05:
            robots_status = 404
        elif kind < 0.08:
            robots_status = 503
        body = b"User-agent: *\nDisallow: /private/\n"
        if rng.random() < 0.2:
            body += f"Crawl-delay: {rng.choice([2, 5, 10])}\n".encode()
        hosts.append(SimHost(
            name=f"h{i}.sim", ip=ip, pages=rng.randint(3, 15),
            latency=rng.choice([0.05, 0.2, 1.0]), robots_status=robots_status,
            robots_body=body, failure_rate=rng.choice([0.0, 0.0, 0.1]),
            retry_after=rng.choice([None, "30", "120"]),
        ))
    return SimWeb(hosts, seed=seed)


@pytest.mark.parametrize("seed", range(6))
def test_random_webs_have_zero_violations_and_full_coverage(seed: int) -> None:
    web = random_web(seed, n_hosts=150)
    config = sim_config(delay=1.0, max_in_flight_per_ip=3, max_retries=20)
    report = simulate(web, config)
    assert report.violations == []
    missing = allowed_pages(web) - fetched_pages(report)
    assert missing == set(), sorted(missing)[:10]
    obeyed = {h.name for h in web.hosts if h.robots_status == 200}
    assert not any(path.startswith("/private/") for host, path in fetched_pages(report)
                   if host in obeyed)
    assert any(path.startswith("/private/") for _, path in fetched_pages(report))  # 404 hosts


def test_thousands_of_hosts_with_hours_of_virtual_time() -> None:
    web = random_web(99, n_hosts=1000)
    report = simulate(web, sim_config(delay=2.0, max_in_flight_per_ip=4, max_retries=20))
    assert report.violations == []
    assert allowed_pages(web) <= fetched_pages(report)
    assert report.virtual_seconds > 60


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


def test_due_urls_are_handed_out_within_ten_minutes_with_capacity() -> None:
    web = random_web(7, n_hosts=300)
    report = simulate(web, sim_config(delay=1.0, max_in_flight_per_ip=0, concurrency=512))
    lags = sorted(report.due_lags)
    p99 = lags[int(0.99 * (len(lags) - 1))]
    print(f"due-to-lease lag: p50 {lags[len(lags) // 2]:.1f}s p99 {p99:.1f}s over {len(lags)}")
    assert report.violations == []
    assert p99 <= 600.0
