"""The real worker and frontier on random simulated webs of 150 hosts (robots.txt 404 and
503, Crawl-delays, failures with Retry-After, several hosts an IP), in virtual time.

Every run is judged by the independent observer: zero requests over a host's
or an IP's in-flight cap, zero gaps shorter than the delay in force, zero
requests to disallowed paths, during back-off, or while robots.txt is
unreachable; and every allowed URL eventually fetched.

One file of three (with ``test_random_webs_sim.py`` and ``test_large_web_sim.py``, once
one file): ``--dist loadfile`` runs them in different test processes (docs/testing.md,
"The time budget").
"""

from __future__ import annotations

import pytest

from courtier.sim.run import sim_config, simulate
from tests.sim.random_webs import allowed_pages, fetched_pages, random_web


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
