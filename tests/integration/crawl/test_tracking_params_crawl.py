"""Tracking parameters in a real crawl: pages that link each other with ``?utm_source=…``,
``?fbclid=…`` and ``?gclid=…`` are each fetched once, without them, while a parameter
that is not on the list (``?v=2``) still makes a URL of its own. Judged from the test
server's log."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from courtier.testweb import HostSpec, TestWebServer, WebSpec
from tests.integration.politeness.helpers import run_crawl

HOST = "track.test"


@pytest.mark.timeout(120)
async def test_tracking_variants_are_fetched_once(tmp_path: Path) -> None:
    spec = WebSpec(hosts=[HostSpec(HOST, pages=6, tracking_links=True)])
    async with TestWebServer(spec) as server:
        index = server.web.page(HOST, "/").body
        assert b"utm_source=" in index and b"fbclid=" in index and b"gclid=" in index
        await asyncio.wait_for(run_crawl(server, tmp_path / "d", delay=0.02), 90)
        requests = Counter(r.path_qs for r in server.requests_for(HOST) if r.method == "GET")
    pages = {path: n for path, n in requests.items() if path.startswith("/p/")}
    assert {f"/p/{j}.html" for j in range(6)} <= set(pages), requests
    # every page once, never with a tracking parameter; ?v=2 once, as its own URL
    assert set(pages) == {f"/p/{j}.html" for j in range(6)} | {"/p/0.html?v=2"}, requests
    assert set(pages.values()) == {1}, requests
