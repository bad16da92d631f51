"""TLS handshakes per host in a crawl of the test web over HTTPS (issue 31), judged from
the server's side: the test web counts every completed handshake by the name the client
sent (SNI) and logs every request.

One host of 12 pages served with keep-alive (the test web's default), crawled with one
request at a time and a 0.1 s delay: the connection outlives the delay, so the crawl makes
far fewer handshakes than it fetches pages. The crawler's own counts (the metric and the
host's live figure in ``domain stats``) are read from its admin API once every request the
server logged has been answered, and must equal the server's count.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from courtier.core.config import build_config
from courtier.crawl.app import crawl
from courtier.testweb import HostSpec, TestWebServer, WebSpec
from courtier.testweb.responses import is_robots_path, normalize_path
from courtier.testweb.tls import TestCA

HOST = "keep.tls.test"


async def get(session: aiohttp.ClientSession, url: str) -> tuple[str, Any]:
    async with session.get(url) as response:
        assert response.status == 200, url
        if response.content_type == "application/json":
            return "", await response.json()
        return await response.text(), None


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == name}


@pytest.mark.timeout(120)
async def test_a_kept_alive_host_makes_fewer_handshakes_than_pages(tmp_path: Path) -> None:
    """Pages fetched (the server's log) outnumber the TLS handshakes the server counted
    for the host; the crawler's ``courtier_tls_handshakes_total`` for the host and the
    host's ``tls_handshakes`` in ``domain stats`` equal the server's count (measured: 1
    handshake for 36 pages and a robots.txt). Seen red with keep-alive disabled in the
    crawler (``force_close=True`` in the transport's connector: 37 handshakes against 36
    pages) and with the counter broken (``HandshakeCounter`` not counting the host's
    live figure: 0 against the server's 1; not counting the metric: no series)."""
    ca = TestCA()
    spec = WebSpec(hosts=[HostSpec(HOST, pages=12)])
    async with TestWebServer(spec, ssl_context=ca.server_context([HOST])) as server:
        resolve = tmp_path / "hosts.txt"
        resolve.write_text(server.web.hosts_file_text())
        config = build_config({
            "data": tmp_path / "data", "seeds": tuple(server.web.seeds()),
            "resolve": resolve, "allow_network": ("127.0.0.1/32",), "delay": 0.1,
            "progress": "none", "concurrency": 4, "linger": 0.0, "continuous": True,
            "ca_file": ca.write_pem(tmp_path / "ca.pem"), "api": "127.0.0.1:0",
            "max_seconds": 100.0,
        }, environ={})
        api: list[str] = []
        stop = asyncio.Event()
        task = asyncio.create_task(crawl(config, install_signals=False,
                                         announce=api.append, stop=stop))
        expected = server.web.expected_fetches()
        host_key = server.base_url(HOST)
        try:
            async with aiohttp.ClientSession() as session:
                while True:  # every page fetched and every logged request answered
                    assert not task.done(), "the crawl ended before its pages were fetched"
                    fetched = {server.url(r.host, normalize_path(r.path_qs))
                               for r in server.log if not is_robots_path(r.path_qs)}
                    if api and fetched >= expected:
                        text, _ = await get(session, api[0].rstrip("/") + "/metrics")
                        answered = sum(samples(text, "courtier_responses_total").values()) \
                            + sum(samples(text, "courtier_robots_fetches_total").values())
                        if answered >= len(server.log):
                            break
                    await asyncio.sleep(0.05)
                handshakes = samples(text, "courtier_tls_handshakes_total")
                authority = host_key.removeprefix("https://")
                base = api[0].rstrip("/")
                _, stats = await get(session, f"{base}/v1/domains/{authority}/stats")
        finally:
            stop.set()
            await task
        server_count = server.tls_handshakes[HOST]
        log = list(server.log)
    pages = [r for r in log if not is_robots_path(normalize_path(r.path_qs))]
    assert len(pages) >= len(expected) >= 12
    assert 1 <= server_count < len(pages)
    assert handshakes == {(("host", host_key), ("session", "new")): server_count}
    (live,) = [h["live"] for h in stats["hosts"] if h["host_key"] == host_key]
    assert (live["tls_handshakes"], live["tls_resumed"]) == (server_count, 0)
