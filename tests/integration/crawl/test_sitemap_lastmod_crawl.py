"""A newer ``lastmod`` makes a known URL due: a second run reads a sitemap whose dates are
later than the first run's fetches, and the server sees those pages fetched again; with
the old dates, it does not. Judged from the test server's log."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from courtier.testweb import HostSpec, TestWebServer, WebSpec
from tests.integration.politeness.helpers import run_crawl

DAY = 86400.0
HOST = "sm.test"
PAGES = ("/s/0.html", "/s/1.html", "/s/2.html")


async def second_run_fetches(tmp_path: Path, newer: bool) -> list[str]:
    old = float(int(time.time() - 10 * DAY))
    data = tmp_path / "d"
    first = WebSpec(hosts=[HostSpec(HOST, pages=1, sitemap_pages=3, sitemap_lastmod=old)])
    async with TestWebServer(first) as server:
        await asyncio.wait_for(run_crawl(server, data, delay=0.02), 90)
        port = server.port
        assert all(any(r.path_qs == p for r in server.log) for p in PAGES)
    finished = time.time()
    # the same host and port; the sitemap now dates the pages after the first fetches (a
    # date still in the future when read counts as the time it is read)
    stamp = float(int(finished + 2)) if newer else old
    second = WebSpec(hosts=[HostSpec(HOST, pages=1, sitemap_pages=3, sitemap_lastmod=stamp)])
    async with TestWebServer(second, port=port) as server:
        # a new URL of the same sitemap (the query is ignored by the server) is due now
        sitemap = server.url(HOST, "/sitemaps/pages.xml.gz?look=2")
        await asyncio.wait_for(run_crawl(server, data, delay=0.02, seeds=(sitemap,)), 90)
        return [r.path_qs for r in sorted(server.log, key=lambda r: r.start)]


@pytest.mark.timeout(200)
async def test_a_newer_lastmod_makes_known_pages_due(tmp_path: Path) -> None:
    paths = await second_run_fetches(tmp_path, newer=True)
    assert "/sitemaps/pages.xml.gz?look=2" in paths
    for page in PAGES:
        assert paths.count(page) == 1, paths


@pytest.mark.timeout(200)
async def test_an_older_lastmod_changes_nothing(tmp_path: Path) -> None:
    paths = await second_run_fetches(tmp_path, newer=False)
    assert "/sitemaps/pages.xml.gz?look=2" in paths
    assert not [p for p in paths if p in PAGES], paths
