"""http hosts that move to https (issue 31), in crawls of the test web over HTTPS with
its plain-HTTP side, judged from the server's own log (which records each request's
scheme).

Three hosts, each seeded on http: ``up`` redirects every http URL to its https twin
(robots.txt first, so robots.txt teaches the rule), ``pages`` does too but answers 404
for robots.txt on http (a page teaches it), ``away`` redirects every http URL to its
https index (seeded with a page, never ``/``: a redirect, but not to the twin, so the
rule must not apply). Every https index links each of its host's pages as an http URL
as well.
"""

from __future__ import annotations

import asyncio
import collections
import io
import json
from pathlib import Path
from typing import Any

import pytest

from courtier.cli.main import build_parser
from courtier.cli.query import run_query
from courtier.core.config import build_config
from courtier.crawl.app import crawl
from courtier.testweb import HostSpec, RequestRecord, TestWebServer, WebSpec
from courtier.testweb.responses import is_robots_path, normalize_path
from courtier.testweb.tls import TestCA

UP, PAGES, AWAY = "up.upgrade.test", "pages.upgrade.test", "away.upgrade.test"
SPEC = WebSpec(hosts=[HostSpec(UP, pages=8, http_redirect="twin"),
                      HostSpec(PAGES, pages=6, http_redirect="twin_pages"),
                      HostSpec(AWAY, pages=4, http_redirect="home")])


def config_for(server: TestWebServer, tmp_path: Path, seeds: tuple[str, ...],
               ca_file: Path) -> Any:
    resolve = tmp_path / "hosts.txt"
    resolve.write_text(server.web.hosts_file_text())
    return build_config({
        "data": tmp_path / "data", "seeds": seeds, "resolve": resolve,
        "allow_network": ("127.0.0.1/32",), "delay": 0.05, "progress": "none",
        "concurrency": 8, "linger": 0.0, "ca_file": ca_file, "connect_timeout": 2.0,
    }, environ={})


def gets(log: list[RequestRecord], host: str, scheme: str) -> list[RequestRecord]:
    return [r for r in log if r.host == host and r.scheme == scheme and r.method == "GET"]


def url_state(data: Path, url: str) -> dict[str, Any]:
    out = io.StringIO()
    code = run_query(build_parser().parse_args(["url", url, "--data", str(data)]), out)
    assert code == 0, out.getvalue()
    answer: dict[str, Any] = json.loads(out.getvalue())["url"]
    return answer


@pytest.mark.timeout(120)
async def test_after_the_first_upgrade_no_http_request_reaches_the_host(
        tmp_path: Path) -> None:
    """For ``up`` and ``pages`` the server's log shows one http request answered 301 and,
    after it, none on the http port (``pages``: its robots.txt, 404, before it); every
    page of theirs fetched over https, each once; ``courtier url`` of a linked http URL
    says it was settled as a redirect to its twin without a request. ``away`` is
    unaffected: each of its linked http URLs was requested over http. A second crawl of
    the same data, seeded with one more http URL of ``up``, sends nothing to its http
    port either (the rule came back from the store). Seen red with the rule disabled
    (``Fetcher._learn_upgrade`` returning at once: every linked http URL of ``up``
    requested, 10 http requests answered 301 instead of 1) and with the stored rule not
    restored when the host is registered (the second crawl asked ``up``'s http port for
    robots.txt)."""
    ca = TestCA()
    ca_file = ca.write_pem(tmp_path / "ca.pem")
    context = ca.server_context([h.name for h in SPEC.hosts])
    async with TestWebServer(SPEC, ssl_context=context, plain_http=True) as server:
        web = server.web
        seeds = (web.http_url(UP, "/"), web.http_url(PAGES, "/"),
                 web.http_url(AWAY, "/p/0.html"))
        config = config_for(server, tmp_path, seeds, ca_file)
        status = await asyncio.wait_for(crawl(config, install_signals=False), 100)
        first_log = list(server.log)
        again = web.http_url(UP, "/p/0.html?again=1")
        config = config_for(server, tmp_path, (again,), ca_file)
        await asyncio.wait_for(crawl(config, install_signals=False), 100)
        second_log = server.log[len(first_log):]
    assert status.stop_reason == "nothing due"
    for host, pages in ((UP, 8), (PAGES, 6)):
        http = gets(first_log, host, "http")
        moved = [r for r in http if r.status == 301]
        assert len(moved) == 1, [(r.path_qs, r.status) for r in http]
        assert all(r.start <= moved[0].start for r in http), "an http request after the 301"
        https = collections.Counter(normalize_path(r.path_qs)
                                    for r in gets(first_log, host, "https")
                                    if not is_robots_path(normalize_path(r.path_qs)))
        assert {f"/p/{i}.html" for i in range(pages)} <= set(https)
        assert max(https.values()) == 1
    assert [normalize_path(r.path_qs) for r in gets(first_log, PAGES, "http")] \
        == ["/robots.txt", "/"]
    away_http = {normalize_path(r.path_qs) for r in gets(first_log, AWAY, "http")}
    assert {f"/p/{i}.html" for i in range(4)} <= away_http
    settled = await asyncio.to_thread(url_state, config.data,
                                      web.http_url(UP, "/p/3.html"))
    assert (settled["outcome"], settled["status"], settled["error_kind"]) == (
        "redirect", None, "https_upgrade")
    assert settled["redirect_to"] == web.url(UP, "/p/3.html")
    assert gets(second_log, UP, "http") == []
    assert [r.path_qs for r in gets(second_log, UP, "https")] == ["/p/0.html?again=1"]
