"""A real one-shot crawl's summary says how many URLs were left for later and why.

Three hosts: one answers (its page is done until its recrawl, so it is not left
for later), one answers 503 with a long Retry-After (retrying), one whose
robots.txt answers 503 (its page is never fetched).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp import web

from courtier.crawl.app import crawl
from courtier.crawl.progress import summary_line
from tests.integration.serve import loopback_crawl, serve


@pytest.mark.timeout(120)
async def test_a_crawl_ending_with_retries_pending_says_so(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        host = request.host.split(":")[0]
        seen.append((host, request.path))
        if host == "down.test" and request.path == "/robots.txt":
            return web.Response(status=503)
        if request.path == "/robots.txt":
            return web.Response(status=404)
        if host == "busy.test":
            return web.Response(status=503, headers={"Retry-After": "3600"})
        return web.Response(text="<html><body>done</body></html>", content_type="text/html")

    async with serve(handle) as port:
        config = loopback_crawl(
            tmp_path, "busy.test fine.test down.test",
            tuple(f"http://{h}.test:{port}/" for h in ("busy", "fine", "down")))
        status = await crawl(config, install_signals=False)
    # what the server saw: the fine page was fetched, the down host's page never was
    assert ("fine.test", "/") in seen and ("busy.test", "/") in seen
    assert ("down.test", "/") not in seen
    assert status.left_for_later
    assert (status.left_unfetched, status.left_retrying) == (1, 1)
    text = summary_line(status)
    assert "left for later: 2 URLs unfinished (1 never fetched, 1 retrying); 2 hosts" in text, \
        text
    assert "robots.txt unreachable: 1 [http_503 1]" in text and "back-off 429/5xx: 1" in text, text
