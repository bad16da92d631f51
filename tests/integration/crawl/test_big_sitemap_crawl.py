"""A sitemap over the page cap: 50,000 URLs in 13 MiB (the page cap is 10 MiB) are all
taken in. Judged from the test server's log (the whole body was sent and taken) and the
store's rows (every listed URL is known)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from courtier.core.config import CrawlConfig
from courtier.crawl.intake import Intake, Scope
from courtier.testweb import HostSpec, TestWebServer, WebSpec
from tests.integration.fetch.test_loop_stalls import frozen_gc
from tests.integration.politeness.helpers import run_crawl

HOST = "big.test"
ENTRIES = 50_000


@pytest.mark.timeout(240)
async def test_a_sitemap_over_the_page_cap_is_read_whole(tmp_path: Path) -> None:
    path = "/sitemaps/big.xml"
    spec = WebSpec(hosts=[HostSpec(HOST, pages=1, big_sitemap=ENTRIES)])
    data = tmp_path / "d"
    async with TestWebServer(spec) as server:
        body = server.web.page(HOST, "/sitemaps/big.xml").body
        assert len(body) > 10 * 1024 * 1024  # over the default --max-body-bytes
        listed = set(server.web.big_sitemap_urls(HOST))
        # the control: taking the 50,000 URLs in at once, as one step on the loop would
        began = time.perf_counter()
        Intake(Scope(CrawlConfig(scope="any"), [])).links(list(listed), 1, 0.0,
                                                          check_traps=False)
        control = time.perf_counter() - began
        # the sitemap is the seed; one page fetch (the sitemap itself), then the crawl ends
        with frozen_gc():
            status = await asyncio.wait_for(run_crawl(
                server, data, seeds=(server.url(HOST, path),), max_pages=1,
                parse_timeout=120.0), 200)
        sent = [r for r in server.log if r.path_qs == path]
    assert len(sent) == 1 and sent[0].whole and sent[0].status == 200
    assert sent[0].body_sent == len(server.web.page(HOST, path).body)
    with sqlite3.connect(data / "courtier.db") as db:
        known = {url for (url,) in db.execute("SELECT url FROM urls")}
    assert len(listed) == ENTRIES
    missing = listed - known
    assert not missing, f"{len(missing)} of {ENTRIES} listed URLs not taken in"
    # the entries were taken in by steps: no stall near what one step of all would cost
    # (the control, measured here under the same load; see test_loop_stalls.py)
    assert status.longest_stall < control / 2, (status.longest_stall, control)


@pytest.mark.timeout(240)
async def test_a_sitemap_over_the_limit_keeps_the_urls_before_the_cut(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Over the sitemap limit (patched down to 2 MiB here, 50 MiB in production): the URLs
    before the cut are taken in, in document order, and the cut is logged."""
    monkeypatch.setattr("courtier.crawl.fetcher.MAX_SITEMAP_BYTES", 2 * 1024 * 1024)
    spec = WebSpec(hosts=[HostSpec(HOST, pages=1, big_sitemap=20_000)])
    data = tmp_path / "d"
    path = "/sitemaps/big.xml"
    async with TestWebServer(spec) as server:
        listed = server.web.big_sitemap_urls(HOST)
        await asyncio.wait_for(run_crawl(
            server, data, seeds=(server.url(HOST, path),), max_pages=1, parse_timeout=120.0,
            max_body_bytes=1024 * 1024, max_decoded_bytes=1024 * 1024), 200)
    with sqlite3.connect(data / "courtier.db") as db:
        known = {url for (url,) in db.execute("SELECT url FROM urls")}
    taken = [url for url in listed if url in known]
    # 2 MiB of ~270-byte entries: about 7,700 of the 20,000, the first ones
    assert 7_000 < len(taken) < 8_500, len(taken)
    assert taken == listed[:len(taken)]
    assert any("sitemap_cut" in getattr(r, "event", "") or "is over 2 MiB" in r.getMessage()
               for r in caplog.records)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", ["/sitemaps/big.xml", "/sitemaps/big.xml.gz"])
async def test_a_60_mb_sitemap_gives_its_first_50000_urls_and_says_why(
        tmp_path: Path, path: str, caplog: pytest.LogCaptureFixture) -> None:
    """Bad input (issue 31): a sitemap of 60 MB (230,000 entries; plain, and gzipped so
    that only its decompressed size is over), with the production limits. The first
    50,000 URLs in document order are taken in, none after them, and a ``sitemap_cut``
    warning gives the reason (the entry limit). Seen red with the fetcher's log of the
    reader's cut taken out (no record named the entry limit: the gzipped sitemap logged
    nothing at all)."""
    entries = 230_000
    spec = WebSpec(hosts=[HostSpec(HOST, pages=1, big_sitemap=entries)])
    data = tmp_path / "d"
    caplog.set_level("WARNING", logger="courtier")
    async with TestWebServer(spec) as server:
        plain = server.web.page(HOST, "/sitemaps/big.xml").body
        assert len(plain) > 60_000_000  # over the protocol's 50 MiB once decoded
        listed = server.web.big_sitemap_urls(HOST)
        await asyncio.wait_for(run_crawl(
            server, data, seeds=(server.url(HOST, path),), max_pages=1,
            parse_timeout=240.0), 280)
        sent = [r for r in server.log if r.path_qs == path]
    assert len(sent) == 1 and sent[0].status == 200
    with sqlite3.connect(data / "courtier.db") as db:
        known = {url for (url,) in db.execute("SELECT url FROM urls")}
    taken = [url for url in listed if url in known]
    assert len(taken) == ENTRIES and taken == listed[:ENTRIES]
    cuts = [r for r in caplog.records if getattr(r, "event", "") == "sitemap_cut"]
    assert any(f"more than {ENTRIES} entries" in r.getMessage() for r in cuts), \
        [r.getMessage() for r in cuts]
