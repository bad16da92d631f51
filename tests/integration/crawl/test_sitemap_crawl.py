"""Sitemaps in a real crawl: robots.txt ``Sitemap:`` → a sitemap index → a gzipped child,
whose pages (linked from nowhere else) are fetched, with their ``<lastmod>`` stored and
used to schedule the next visit. Fetches are judged from the server's log."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from courtier.core.urls import canonicalize
from courtier.store.sqlite import SqliteStore
from courtier.testweb import HostSpec, TestWebServer, WebSpec
from tests.integration.politeness.helpers import run_crawl

DAY = 86400.0


@pytest.mark.timeout(120)
async def test_sitemap_index_and_gzipped_child_from_robots_txt(tmp_path: Path) -> None:
    # /s/0, /s/1, /s/2 were last modified 2.5, 1.5 and 0.5 days ago
    lastmod = float(int(time.time() - 2.5 * DAY))
    spec = WebSpec(hosts=[HostSpec("sm.test", pages=1, sitemap_pages=3, sitemap_lastmod=lastmod)])
    data = tmp_path / "d"
    async with TestWebServer(spec) as server:
        assert b"Sitemap: " in server.web.page("sm.test", "/robots.txt").body
        await asyncio.wait_for(run_crawl(server, data, delay=0.05), 60)
        paths = [r.path_qs for r in sorted(server.log, key=lambda r: r.start)]
        listed = server.web.sitemap_urls("sm.test")
        plain = server.url("sm.test", "/p/0.html")
    # the index, then its gzipped child, then the pages only the child lists
    assert paths.index("/sitemaps/index.xml") < paths.index("/sitemaps/pages.xml.gz")
    for k in range(3):
        assert paths.index("/sitemaps/pages.xml.gz") < paths.index(f"/s/{k}.html")
    store = SqliteStore(data / "courtier.db")
    await store.open()
    try:
        rows = [await store.get_url(canonicalize(url).url_key) for url, _ in listed]
        control = await store.get_url(canonicalize(plain).url_key)
    finally:
        await store.close()
    assert all(r is not None and r["outcome"] == "ok" for r in rows)
    # the stored hint is the lastmod served...
    assert [r["sitemap_lastmod"] for r in rows if r] == [when for _, when in listed]
    # ...and it sets the pace: before any history the next visit is due after the page's
    # age (now − lastmod), so the older page waits longer, and both longer than a page
    # without a hint (the default: a day)
    intervals = [r["interval"] for r in rows if r]
    assert control is not None and control["sitemap_lastmod"] is None
    assert intervals[0] > intervals[1] > control["interval"], intervals
    for (_, when), row in zip(listed[:2], rows[:2], strict=True):
        assert row is not None
        assert abs(row["interval"] - (row["last_fetch_at"] - when)) < 60.0
