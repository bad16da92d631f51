"""Crawls of the test web over HTTPS (issue 31), judged from the server's own log.

The CA is made at test time (``courtier.testweb.tls``); names reach 127.0.0.1 through
``--resolve``; nothing is resolved for real. Checked red: with ``ca_file`` dropped
from the transport in app.py, the first test fetched nothing.
"""

from __future__ import annotations

import asyncio
import collections
import socket
from pathlib import Path

import pytest

from courtier.core.config import build_config
from courtier.core.urls import canonicalize
from courtier.crawl.app import crawl
from courtier.crawl.progress import summary_line
from courtier.store.sqlite import SqliteStore
from courtier.testweb import HostSpec, TestWebServer, WebSpec, default_web, politeness_violations
from courtier.testweb.tls import TestCA

DELAY = 0.1


def flags_for(server: TestWebServer, tmp_path: Path, **extra: object) -> dict[str, object]:
    resolve = tmp_path / "hosts.txt"
    resolve.write_text(server.web.hosts_file_text() + extra.pop("hosts", ""))  # type: ignore[operator]
    flags: dict[str, object] = {
        "data": tmp_path / "data", "seeds": tuple(server.web.seeds()), "resolve": resolve,
        "allow_network": ("127.0.0.1/32",), "delay": DELAY, "progress": "none",
        "concurrency": 16, "linger": 0.0, "connect_timeout": 2.0,
    }
    flags.update(extra)
    return flags


@pytest.mark.timeout(120)
async def test_https_crawl_with_ca_file_fetches_every_page(tmp_path: Path) -> None:
    ca = TestCA()
    spec = default_web(n_hosts=3, pages_per_host=6, crawl_delay=0.2)
    context = ca.server_context([h.name for h in spec.hosts])
    async with TestWebServer(spec, ssl_context=context) as server:
        assert all(seed.startswith("https://") for seed in server.web.seeds())
        config = build_config(flags_for(server, tmp_path,
                                        ca_file=ca.write_pem(tmp_path / "ca.pem")), environ={})
        status = await asyncio.wait_for(crawl(config, install_signals=False), 100)
        expected = server.web.expected_fetches()
        log = list(server.log)
    assert status.stop_reason == "nothing due"
    gets = [r for r in log if r.method == "GET" and not r.path_qs.startswith("/robots")]
    counts = collections.Counter(server.url(r.host, r.path_qs) for r in gets)
    assert set(counts) == expected and expected
    assert [u for u, n in counts.items() if n > 1] == []
    assert politeness_violations(log, delay=DELAY, max_in_flight=1) == []


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.timeout(120)
async def test_failing_hosts_end_the_crawl_by_themselves_with_reasons(tmp_path: Path) -> None:
    """Next to a good https host: one whose CA is not given, a name missing from the
    hosts file, a closed port, and an address outside --allow-network. The crawl ends by
    itself, the good host is fully fetched, nothing reached the untrusted host's
    handler, and each failure has its reason: the guard's URLs end ``blocked``, the
    others' robots.txt stays unreachable and the final line says so."""
    ca, rogue = TestCA(), TestCA()
    good = WebSpec(hosts=[HostSpec("good.test", pages=3)])
    bad = WebSpec(hosts=[HostSpec("untrusted.test", pages=3)])
    port = closed_port()
    async with (TestWebServer(good, ssl_context=ca.server_context(["good.test"])) as server,
                TestWebServer(bad, ssl_context=rogue.server_context(["untrusted.test"]))
                as untrusted):
        others = (untrusted.url("untrusted.test", "/"), "https://typo.test/",
                  f"https://closed.test:{port}/", "https://far.test/")
        config = build_config(flags_for(
            server, tmp_path, ca_file=ca.write_pem(tmp_path / "ca.pem"),
            seeds=(*server.web.seeds(), *others),
            hosts="127.0.0.1 untrusted.test closed.test\n127.0.0.2 far.test\n"), environ={})
        status = await asyncio.wait_for(crawl(config, install_signals=False), 100)
        expected = server.web.expected_fetches()
        fetched = {server.url(r.host, r.path_qs) for r in server.log
                   if not r.path_qs.startswith("/robots")}
        untrusted_log = list(untrusted.log)
    assert fetched == expected and expected
    assert untrusted_log == []  # every handshake failed before a request
    store = SqliteStore(tmp_path / "data" / "courtier.db")
    await store.open()
    try:
        far = await store.get_url(canonicalize("https://far.test/").url_key)
    finally:
        await store.close()
    assert far is not None and far["outcome"] == "blocked" and far["error_kind"] == "blocked"
    assert status.left_for_later
    # the three reasons are the hosts' robots.txt failure kinds once the worker passes
    # them to Frontier.finish_robots (error_kind=exc.kind); until then they read "error"
    assert "robots.txt unreachable: 3 [" in summary_line(status), summary_line(status)
