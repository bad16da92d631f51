"""A hostile sitemap costs bounded memory and a bounded time (issue 14).

A 20 KB gzip that inflates to a ``<urlset>`` of millions of elements that are
not entries took ~430 MiB and 13.5 s on the loop: every such element stayed
in the tree. Memory is judged relatively (4× the junk must not cost more than
a little more memory), the time budget by its effect (a zero budget cuts).
"""

from __future__ import annotations

import gzip
import tracemalloc

from courtier.parse.sitemap_source import SitemapSource
from courtier.parse.sitemaps import MAX_ENTRY_CHILDREN, SitemapResult, parse_sitemap

NS = b"http://www.sitemaps.org/schemas/sitemap/0.9"


def hostile(junk: int) -> bytes:
    return gzip.compress(
        b"<urlset xmlns='%s'><url><loc>http://a.test/first</loc></url>" % NS
        + b"<x>j</x>" * junk
        + b"<url>" + b"<y/>" * junk + b"<loc>http://a.test/last</loc></url></urlset>")


def peak_bytes(body: bytes) -> tuple[int, list[str]]:
    tracemalloc.start()
    try:
        result = parse_sitemap(body, "http://a.test/sitemap.xml.gz")
        return tracemalloc.get_traced_memory()[1], [e.loc for e in result.urls]
    finally:
        tracemalloc.stop()


def test_junk_elements_are_dropped_as_they_end() -> None:
    small, locs_small = peak_bytes(hostile(20_000))
    large, locs_large = peak_bytes(hostile(80_000))
    assert locs_small == locs_large == ["http://a.test/first", "http://a.test/last"]
    # kept in the tree, 60,000 more elements would cost megabytes (≥ 100 bytes each)
    assert large < small + 1_000_000, (small, large)


def test_an_entry_keeps_its_fields_among_junk_children() -> None:
    body = (b"<urlset><url>" + b"<loc2/>" * (MAX_ENTRY_CHILDREN * 3)
            + b"<lastmod>2024-01-02</lastmod><loc>http://a.test/x</loc></url></urlset>")
    result = parse_sitemap(body, "http://a.test/sitemap.xml")
    assert [e.loc for e in result.urls] == ["http://a.test/x"]
    assert result.urls[0].lastmod is not None


def test_a_spent_time_budget_cuts_the_parse() -> None:
    result = parse_sitemap(hostile(50_000), "http://a.test/sitemap.xml.gz", time_budget=0.0)
    assert result.truncated
    assert any("time budget" in e for e in result.errors)
    assert [e.loc for e in result.urls] == ["http://a.test/first"]  # what was read is kept
    text = parse_sitemap(b"\n" * 100_000 + b"http://a.test/t\n", "http://a.test/s.txt",
                         time_budget=0.0)
    assert text.truncated and text.urls == []


def test_gzip_is_read_as_a_stream_within_the_size_cap() -> None:
    body = gzip.compress(b"<urlset><url><loc>http://a.test/a</loc></url>" + b" " * 10_000
                         + b"<url><loc>http://a.test/b</loc></url></urlset>")
    cut = parse_sitemap(body, "http://a.test/sitemap.xml.gz", max_bytes=5_000)
    assert cut.truncated and [e.loc for e in cut.urls] == ["http://a.test/a"]
    two_members = gzip.compress(b"http://a.test/1\n") + gzip.compress(b"http://a.test/2\n")
    assert [e.loc for e in parse_sitemap(two_members, "http://a.test/s.gz").urls] == [
        "http://a.test/1", "http://a.test/2"]


def test_a_plain_body_is_read_without_copying_its_rest() -> None:
    """A plain sitemap's reads each copy only the piece they return: reading 8 MiB in the
    XML parser's 16 KiB reads allocates no more than a few pieces at once. Seen red with
    the old source, which sliced the rest of the body off at every read: a peak of
    17,743,878 bytes (for the 60 MB sitemap of test_big_sitemap_crawl.py, ~32 CPU-s of
    copying against 0.8 s, past the crawler's 10 s parse budget)."""
    body = b"<urlset>" + b"<url><loc>http://a.test/x</loc></url>" * 240_000 + b"</urlset>"
    assert len(body) > 8 * 1024 * 1024
    result = SitemapResult()
    source = SitemapSource(body, len(body), result)
    tracemalloc.start()
    try:
        read = 0
        while piece := source.read(16 * 1024):
            read += len(piece)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert read == len(body) and not result.truncated
    assert peak < 256 * 1024, peak
