"""One politeness clock per server across worker processes: two real ``courtier worker``
processes on PostgreSQL crawl a test web whose hosts answer over HTTPS and, on a second
port, over plain HTTP with the same pages (``http_redirect="serve"``), each page linking
both schemes, each host asking a Crawl-delay. Judged from the test web's own log by host
NAME, whatever the scheme, the port or the worker: no two requests to one name overlap
and no two starts are closer than the Crawl-delay. The single-process form is
``tests/integration/politeness/test_one_clock_per_server.py``.

Both workers are given the seeds (either may start first; the second one's join moves
shards, and the clocks with them, mid-crawl).

Seen red on a scratch copy whose ``server_of`` (core/urls.py) kept the scheme (the shard
and the clock then come from scheme + name: ``http://h`` and ``https://h`` may belong to
two workers, and are two clocks in one): see the test's docstring for the figures.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from courtier.testweb.server import politeness_violations
from courtier.testweb.spec import HostSpec, WebSpec, host_name
from courtier.testweb.tls import TestCA
from tests.integration.cluster.conftest import spread_domain
from tests.integration.cluster.harness import Cluster, serving, stop, wait_for

pytestmark = pytest.mark.timeout(300)

CRAWL_DELAY = 0.3
HOSTS, PAGES = 4, 3
WORKERS = ("w0", "w1")
DOMAIN = spread_domain(HOSTS, WORKERS, least=2)


@pytest.fixture
async def cluster(dsn: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    names = [host_name(i, DOMAIN) for i in range(HOSTS)]
    spec = WebSpec(hosts=[HostSpec(name, pages=PAGES, robots="crawl_delay",
                                   crawl_delay=CRAWL_DELAY, http_redirect="serve",
                                   latency=0.02) for name in names])
    ca = TestCA()
    ca_file = ca.write_pem(tmp_path / "ca.pem")
    async with serving(dsn, tmp_path, spec, delay=0.05, extra=["--ca-file", str(ca_file)],
                       ssl_context=ca.server_context(names), plain_http=True) as cluster:
        yield cluster


async def test_http_and_https_of_one_server_share_one_clock_across_workers(
        cluster: Cluster) -> None:
    """Every page of every host is fetched over both schemes, by both workers between
    them; the server's log, grouped by host name, shows no overlap and no start closer
    than the Crawl-delay.

    Seen red on a scratch copy with ``server_of`` returning ``scheme://name`` (by
    ``PYTHONPATH``, workers included), 2 runs of 2 (and 2 of 2 with a first version of
    that copy): 76 and 70 violations, the first "h00.c1.courtier.test: GET /robots.txt
    started 0.245s after /robots.txt (delay 0.300s)" (robots.txt of each scheme, on two
    clocks). Green: 21.6 s for the test on a loaded machine (load 10).
    """
    web = cluster.server.web
    names = [h.name for h in cluster.spec.hosts]
    seeds = [u for name in names for u in (web.url(name, "/"), web.http_url(name, "/"))]
    wanted = {(scheme, name, f"/p/{i}.html") for name in names for i in range(PAGES)
              for scheme in ("http", "https")}
    for worker in WORKERS:
        await cluster.start(worker, *seeds)

    async def every_page_over_both_schemes() -> bool:
        return wanted <= {(r.scheme, r.host, r.path_qs) for r in cluster.log()}

    await wait_for("every page fetched over both schemes", every_page_over_both_schemes)
    await stop(cluster)
    log = cluster.log()
    by_worker = {w: {r.host for r in cluster.requests_by(w)} for w in WORKERS}
    assert all(by_worker.values()), by_worker  # both workers crawled
    print(f"{len(log)} requests; hosts by worker {by_worker}")
    assert politeness_violations(log, delay=CRAWL_DELAY, max_in_flight=1) == []
