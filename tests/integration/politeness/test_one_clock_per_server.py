"""One politeness clock per server, on a real socket: a host served over HTTPS and, on
another port, over plain HTTP with the same pages (the test web's ``http_redirect="serve"``),
whose pages link both schemes, with a Crawl-delay. The server's own log groups requests
by host name, whatever the scheme or port: no two of them may overlap and no two starts
may be closer than the Crawl-delay.

Seen red on the code before the change (the main branch's ``src`` with this change's
test web, put first on ``PYTHONPATH``): 23 and 30 violations in two runs, the first
"one.clock.test: 2 requests in flight at … (max 1) when GET /robots.txt started" (two
host keys, two clocks, one server), then starts closer than the 0.400 s Crawl-delay.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from courtier.core.config import build_config
from courtier.crawl.app import crawl
from courtier.testweb import HostSpec, TestWebServer, WebSpec, politeness_violations
from courtier.testweb.responses import is_robots_path, normalize_path
from courtier.testweb.tls import TestCA

HOST = "one.clock.test"
CRAWL_DELAY = 0.4
SPEC = WebSpec(hosts=[HostSpec(HOST, pages=5, robots="crawl_delay", crawl_delay=CRAWL_DELAY,
                               http_redirect="serve", latency=0.05)])


@pytest.mark.timeout(120)
async def test_http_and_https_of_one_server_share_its_delay(tmp_path: Path) -> None:
    ca = TestCA()
    ca_file = ca.write_pem(tmp_path / "ca.pem")
    async with TestWebServer(SPEC, ssl_context=ca.server_context([HOST]),
                             plain_http=True) as server:
        web = server.web
        resolve = tmp_path / "hosts.txt"
        resolve.write_text(web.hosts_file_text())
        config = build_config({
            "data": tmp_path / "data", "seeds": (web.url(HOST, "/"), web.http_url(HOST, "/")),
            "resolve": resolve, "allow_network": ("127.0.0.1/32",), "delay": 0.05,
            "progress": "none", "concurrency": 8, "linger": 0.0, "ca_file": ca_file,
            "connect_timeout": 2.0,
        }, environ={})
        status = await asyncio.wait_for(crawl(config, install_signals=False), 100)
        log = list(server.log)
    assert status.stop_reason == "nothing due"
    by_scheme = {scheme: [normalize_path(r.path_qs) for r in log if r.scheme == scheme]
                 for scheme in ("http", "https")}
    for scheme, paths in by_scheme.items():
        # robots.txt per scheme and authority (RFC 9309), then the pages of that side
        assert paths[0] == "/robots.txt", (scheme, paths)
        assert {f"/p/{i}.html" for i in range(5)} <= set(paths), (scheme, paths)
        assert sum(1 for p in paths if is_robots_path(p)) == 1
    assert politeness_violations(log, delay=CRAWL_DELAY, max_in_flight=1) == []
