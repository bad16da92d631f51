"""Issue 31's complaint, as a new user meets it: an https web whose private CA is withheld
from the crawl. Every host fails at robots.txt, before any page, so no page has an
outcome yet; ``courtier url`` of any of its URLs and ``courtier domain stats`` must still
name the reason (``tls_unknown_issuer``, the certificate, ``--ca-file``), read from the
store after the crawl has ended (no running crawl to ask).

The test server's own log shows that nothing reached it (every handshake failed).
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

from courtier.cli.main import build_parser
from courtier.cli.query import run_query
from courtier.core.config import build_config
from courtier.crawl.app import crawl
from courtier.testweb import HostSpec, RequestRecord, TestWebServer, WebSpec
from courtier.testweb.tls import TestCA
from tests.integration.crawl.test_tls_crawl import flags_for

HOST = "shop.test"


def query(data: Path, *argv: str) -> dict[str, Any]:
    """What the CLI prints for ``courtier ARGV --data DATA`` (JSON), exit status 0."""
    out = io.StringIO()
    code = run_query(build_parser().parse_args([*argv, "--data", str(data)]), out)
    assert code == 0, out.getvalue()
    answer: dict[str, Any] = json.loads(out.getvalue())
    return answer


@pytest.mark.timeout(120)
def test_courtier_url_names_the_tls_failure_of_robots_txt(tmp_path: Path) -> None:
    """Seen red with the fetcher not storing the failure (``save_robots`` without the
    ``robots_error_*`` fields, as before): ``courtier url`` showed robots
    ``{"source": "none", "robots_state": "unknown", "unreachable": null}``, and with
    ``stored_robots_decision`` not reading them: the same."""
    ca = TestCA()
    spec = WebSpec(hosts=[HostSpec(HOST, pages=3)])
    log: list[RequestRecord] = []
    urls: list[str] = []
    started = time.time()

    async def scenario() -> None:
        async with TestWebServer(spec, ssl_context=ca.server_context([HOST])) as server:
            urls.extend([server.url(HOST, "/"), server.url(HOST, "/p/1.html")])
            # no ca_file: the crawl trusts only the system store, which lacks the test CA
            config = build_config(flags_for(server, tmp_path, seeds=tuple(urls)), environ={})
            await asyncio.wait_for(crawl(config, install_signals=False), 100)
            log.extend(server.log)

    asyncio.run(scenario())
    assert log == []  # every handshake failed: nothing reached the server
    data = tmp_path / "data"
    for url in urls:  # any URL of the host, the seed and a page
        answer = query(data, "url", url)
        assert answer["url"]["outcome"] is None  # no page fetched: the reason is the host's
        robots = answer["robots"]
        assert (robots["source"], robots["robots_state"], robots["decision"]) == (
            "store", "unreachable", "disallowed"), robots
        assert robots["expired"] is False  # no copy was ever fetched
        failure = robots["unreachable"]
        assert failure["kind"] == "tls_unknown_issuer", failure
        assert "certificate issuer not trusted" in failure["message"]
        assert "--ca-file" in failure["message"]
        assert started <= failure["since"] <= failure["last_at"] <= time.time()
        assert failure["text"].startswith("robots.txt: unreachable (tls_unknown_issuer: ")
        assert " since 20" in failure["text"]
    authority = urls[0].split("/")[2]  # shop.test:PORT
    stats = query(data, "domain", "stats", authority)
    (host,) = stats["hosts"]
    stored = host["stored"]["robots_unreachable"]
    assert stored["kind"] == "tls_unknown_issuer" and "--ca-file" in stored["message"]
