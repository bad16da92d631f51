"""Where documents are parsed: small ones inline, the rest off the loop (issue 14)."""

from __future__ import annotations

import gzip

from courtier.parse.offload import (
    INLINE_HTML_BYTES,
    INLINE_SITEMAP_BYTES,
    OffLoopParser,
    html_placement,
    sitemap_placement,
)

LINKS = b"".join(b'<p><a href="/p%d">p</a></p>\n' % i for i in range(4000))


def test_placement_follows_size_and_shape() -> None:
    assert html_placement(b"<a href=/x>x</a>") == "inline"
    assert len(LINKS) > INLINE_HTML_BYTES
    assert html_placement(LINKS) == "thread"
    assert html_placement(b"<div>" * 30_000) == "process"
    assert html_placement(b"<div " + b" a" * 20_000 + b">") == "process"
    urlset = b"<urlset><url><loc>http://a.test/</loc></url></urlset>"
    assert sitemap_placement(urlset) == "inline"
    assert sitemap_placement(gzip.compress(urlset)) == "thread"  # may inflate to 50 MB
    assert sitemap_placement(urlset * (INLINE_SITEMAP_BYTES // len(urlset) + 1)) == "thread"


async def test_thread_and_inline_parses_give_the_same_answers() -> None:
    parser = OffLoopParser(timeout=60.0)
    try:
        assert await parser.html(b"<a href=/x>x</a>", "http://a.test/", None, None,
                                 "courtier") is False  # the caller parses it inline
        page = await parser.html(LINKS, "http://a.test/", "text/html", None, "courtier")
        assert page and len(page.links) == 4000
        body = gzip.compress(b"<urlset><url><loc>http://a.test/s</loc></url></urlset>")
        result = await parser.sitemap(body, "http://a.test/sitemap.xml.gz")
        assert [e.loc for e in result.urls] == ["http://a.test/s"]
    finally:
        parser.close()
