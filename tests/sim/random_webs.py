"""Random simulated webs and what a full, polite crawl of one must fetch: shared by the
simulator's politeness tests (``test_politeness_sim.py``, ``test_random_webs_sim.py``,
``test_large_web_sim.py``)."""

from __future__ import annotations

import random

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
