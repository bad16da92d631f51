"""crawl/sitemap_hints.py: which sitemap entries become (url_key, lastmod) hints."""

from __future__ import annotations

import asyncio

from courtier.core.tracking import TrackingParams
from courtier.core.urls import canonicalize
from courtier.crawl.sitemap_hints import lastmod_hints
from courtier.parse.sitemaps import SitemapEntry, SitemapResult

NOW = 1_700_000_000.0


def test_hints_are_keyed_like_the_intake_and_capped_at_now() -> None:
    result = SitemapResult()
    result.urls = [
        SitemapEntry("http://a.test/1", lastmod=NOW - 100),
        SitemapEntry("http://a.test/2"),                               # no lastmod: no hint
        SitemapEntry("http://a.test/3?utm_source=x", lastmod=NOW - 5),  # keyed without it
        SitemapEntry("mailto:someone", lastmod=NOW - 5),                # refused
        SitemapEntry("http://a.test/4", lastmod=NOW + 9_999),           # future: now
    ]
    hints = asyncio.run(lastmod_hints(result, TrackingParams(), NOW))
    assert hints == [(canonicalize("http://a.test/1").url_key, NOW - 100),
                     (canonicalize("http://a.test/3").url_key, NOW - 5),
                     (canonicalize("http://a.test/4").url_key, NOW)]
