"""Sitemap parsing: crawler-commons vectors plus gzip, index, broken, oversized, cross-host."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime

import pytest

from courtier.parse.sitemaps import SitemapEntry, parse_lastmod, parse_sitemap
from tests.conftest import conformance_file


def _vector(name: str) -> bytes:
    return conformance_file(f"crawler-commons/sitemaps/{name}").read_bytes()


def _ts(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()  # type: ignore[misc]


def _urlset(*locs: str, extra: str = "") -> bytes:
    body = "".join(f"<url><loc>{loc}</loc>{extra}</url>" for loc in locs)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{body}</urlset>'
    ).encode()


# --- crawler-commons vectors -------------------------------------------------------------


def test_cc_gzipped_xml_sitemap_with_all_fields() -> None:
    r = parse_sitemap(_vector("xmlSitemap.gz"), "http://www.example.com/sitemap.xml.gz")
    assert r.kind == "urlset" and r.errors == [] and not r.truncated
    assert [e.loc for e in r.urls] == [
        "http://www.example.com/",
        "http://www.example.com/catalog?item=12&desc=vacation_hawaii",
        "http://www.example.com/catalog?item=73&desc=vacation_new_zealand",
        "http://www.example.com/catalog?item=74&desc=vacation_newfoundland",
        "http://www.example.com/catalog?item=83&desc=vacation_usa",
    ]
    assert r.urls[0] == SitemapEntry("http://www.example.com/", _ts(2005, 1, 1), "monthly", 0.8)
    assert r.urls[1].lastmod is None and r.urls[1].changefreq == "weekly"
    assert r.urls[3].lastmod == _ts(2004, 12, 23, 18, 0, 15) and r.urls[3].priority == 0.3
    assert r.urls[4].changefreq is None and r.urls[4].priority is None


def test_cc_gzipped_text_sitemap() -> None:
    r = parse_sitemap(_vector("sitemap.txt.gz"), "http://www.example.com/sitemap.txt.gz")
    assert r.kind == "text" and len(r.urls) == 5 and r.errors == []
    assert r.urls[-1].loc == "http://www.example.com/catalog?item=83&desc=vacation_usa"


@pytest.mark.parametrize("name", ["sitemap.txt", "sitemap-with-bom.txt"])
def test_cc_text_sitemaps(name: str) -> None:
    r = parse_sitemap(_vector(name), "http://www.domain.com/sitemap.txt")
    assert [e.loc for e in r.urls] == [
        "http://www.domain.com/page1.html",
        "http://www.domain.com/page2.html",
    ]
    assert r.errors == []


def test_cc_text_sitemap_without_trailing_newline() -> None:
    r = parse_sitemap(_vector("do-not-visit.txt"), "http://www.example.com/sitemap.txt")
    assert [e.loc for e in r.urls] == ["http://www.example.com/do-not-visit-here"]


@pytest.mark.parametrize("name", ["sitemap.ns.xml", "sitemap.badns.xml"])
def test_cc_prefixed_and_wrong_namespaces_tolerated(name: str) -> None:
    r = parse_sitemap(_vector(name), "http://www.example.com/sitemap.xml")
    assert [(e.loc, e.changefreq) for e in r.urls] == [
        ("http://www.example.com/1", "daily"),
        ("http://www.example.com/2", "daily"),
    ]
    assert r.errors == []


def test_cc_index_with_bare_text_entries() -> None:
    r = parse_sitemap(_vector("sitemap.index.xml"), "https://example.com/sitemap.xml")
    assert r.kind == "sitemapindex" and r.urls == [] and r.errors == []
    assert len(r.sitemaps) == 15
    assert r.sitemaps[0] == "https://example.com/sitemap.jss?portalCode=10260&lang=en"
    assert r.sitemaps[-1] == "https://example.com/sitemap.jss?portalCode=10570&lang=en"


def test_cc_atom_feed() -> None:
    r = parse_sitemap(_vector("atom.xml"), "http://example.org/feed/")
    assert r.kind == "atom"
    assert r.urls == [
        SitemapEntry("http://example.org/2003/12/13/atom03", _ts(2003, 12, 13, 18, 30, 2))
    ]


def test_cc_extensions_do_not_leak_image_or_video_locs() -> None:
    r = parse_sitemap(_vector("extension/sitemap-images.xml"), "http://www.example.com/s.xml")
    # image:loc values are on example.com (another host) and must not appear or error
    assert [e.loc for e in r.urls] == ["http://www.example.com/images/some_image_landing_page.html"]
    assert r.errors == []
    r = parse_sitemap(_vector("extension/sitemap-videos.xml"), "http://www.example.com/s.xml")
    assert [e.loc for e in r.urls] == [
        f"http://www.example.com/videos/some_video_landing_page{s}.html" for s in ("", "-2", "-3")
    ]
    r = parse_sitemap(_vector("extension/pagemaps-sitemap.xml"), "http://www.example.com/s.xml")
    assert [e.loc for e in r.urls] == ["http://www.example.com/foo", "http://www.example.com/bar"]


def test_cc_news_sitemap_other_host() -> None:
    body = _vector("extension/sitemap-news.xml")
    r = parse_sitemap(body, "http://www.example.org/sitemap-news.xml")
    assert [e.loc for e in r.urls] == [
        "http://www.example.org/business/article55.html",
        "http://www.example.org/empty_news_name.html",
    ]
    refused = parse_sitemap(body, "http://www.example.com/sitemap.xml")
    assert refused.urls == [] and len(refused.errors) == 2
    assert all("cross-host" in e for e in refused.errors)


def test_cc_real_world_news_sitemap_lastmod() -> None:
    body = _vector("extension/hebdenbridgetimes-articles-sitemap.xml")
    r = parse_sitemap(body, "http://www.hebdenbridgetimes.co.uk/sitemap.xml")
    assert r.errors == [] and len(r.urls) > 1
    first = r.urls[0]
    assert first.loc.startswith("http://www.hebdenbridgetimes.co.uk/news/local/video-tour")
    assert first.changefreq == "daily"
    assert first.lastmod == _ts(2015, 5, 3, 17, 51, 50)  # +01:00


# --- own cases ----------------------------------------------------------------------------


def test_cross_host_refused_unless_allowed() -> None:
    body = _urlset("http://a.example/1", "http://b.example/2", "https://a.example/3")
    r = parse_sitemap(body, "http://a.example/sitemap.xml")
    assert [e.loc for e in r.urls] == ["http://a.example/1"]
    assert len(r.errors) == 2  # other host, other scheme
    r = parse_sitemap(body, "http://a.example/sitemap.xml", allow_cross_host=True)
    assert len(r.urls) == 3 and r.errors == []


def test_path_rule_only_when_strict() -> None:
    body = _urlset("http://a.example/docs/x", "http://a.example/other")
    loose = parse_sitemap(body, "http://a.example/docs/sitemap.xml")
    assert len(loose.urls) == 2
    strict = parse_sitemap(body, "http://a.example/docs/sitemap.xml", strict_path=True)
    assert [e.loc for e in strict.urls] == ["http://a.example/docs/x"]


def test_gzip_index_and_bomb_cap() -> None:
    index = (
        b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<sitemap><loc>http://a.example/s1.xml.gz</loc><lastmod>2024-01-01</lastmod></sitemap>"
        b"<sitemap><loc>http://a.example/s2.xml</loc></sitemap></sitemapindex>"
    )
    r = parse_sitemap(gzip.compress(index), "http://a.example/index.xml.gz")
    assert r.sitemaps == ["http://a.example/s1.xml.gz", "http://a.example/s2.xml"]
    bomb = gzip.compress(_urlset("http://a.example/1") + b" " * 5_000_000)
    assert len(bomb) < 10_000
    r = parse_sitemap(bomb, "http://a.example/s.xml", max_bytes=1_000_000)
    assert r.truncated and any("exceeds" in e for e in r.errors)
    assert [e.loc for e in r.urls] == ["http://a.example/1"]


def test_corrupt_gzip_keeps_what_was_read() -> None:
    packed = gzip.compress(b"http://a.example/1\nhttp://a.example/2\n" * 50)
    r = parse_sitemap(packed[: len(packed) // 2 + 10], "http://a.example/s.txt.gz")
    assert r.errors and len(r.urls) >= 1
    r = parse_sitemap(b"\x1f\x8bnot gzip at all", "http://a.example/s.txt.gz")
    assert r.urls == [] and r.errors


def test_broken_xml_keeps_entries_before_the_break() -> None:
    body = _urlset("http://a.example/1", "http://a.example/2")[:-40] + b"<url><loc>http://a."
    r = parse_sitemap(body, "http://a.example/s.xml")
    assert [e.loc for e in r.urls] == ["http://a.example/1"]
    assert any(e.startswith("XML:") for e in r.errors)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"<",
        b"<html><body>not a sitemap</body></html>",
        b"\x00\x01\x02\xff garbage",
        b"<?xml version='1.0'?><urlset><url><loc></loc></url></urlset>",
    ],
)
def test_garbage_never_raises(body: bytes) -> None:
    r = parse_sitemap(body, "http://a.example/s.xml")
    assert r.urls == [] and r.sitemaps == []


def test_dtd_and_entities_refused() -> None:
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>'
        b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc>http://a.example/&lol2;</loc></url></urlset>"
    )
    r = parse_sitemap(laughs, "http://a.example/s.xml")
    assert r.urls == [] and any("refused XML" in e for e in r.errors)
    xxe = (
        b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b"<urlset><url><loc>http://a.example/&x;</loc></url></urlset>"
    )
    r = parse_sitemap(xxe, "http://a.example/s.xml")
    assert r.urls == [] and r.errors


def test_url_cap_truncates() -> None:
    body = _urlset(*(f"http://a.example/{i}" for i in range(30)))
    r = parse_sitemap(body, "http://a.example/s.xml", max_urls=10)
    assert len(r.urls) == 10 and r.truncated
    text = "\n".join(f"http://a.example/{i}" for i in range(30)).encode()
    r = parse_sitemap(text, "http://a.example/s.txt", max_urls=7)
    assert len(r.urls) == 7 and r.truncated


def test_oversized_plain_body_is_cut() -> None:
    text = "\n".join(f"http://a.example/{i}" for i in range(1000)).encode()
    r = parse_sitemap(text, "http://a.example/s.txt", max_bytes=100)
    assert r.truncated and 1 <= len(r.urls) < 10


def test_bad_values_are_reported_but_entry_kept() -> None:
    extra = "<lastmod>yesterday</lastmod><changefreq>sometimes</changefreq><priority>7</priority>"
    r = parse_sitemap(_urlset("http://a.example/1", extra=extra), "http://a.example/s.xml")
    assert r.urls == [SitemapEntry("http://a.example/1")]
    assert len(r.errors) == 3


def test_text_sitemap_bad_lines_name_their_line() -> None:
    r = parse_sitemap(b"http://a.example/1\n\nnot a url\nftp://a.example/x\n", "http://a.example/s")
    assert [e.loc for e in r.urls] == ["http://a.example/1"]
    assert [e.split(":")[0] for e in r.errors] == ["line 3", "line 4"]


def test_errors_are_capped() -> None:
    text = "\n".join(f"http://other.example/{i}" for i in range(500)).encode()
    r = parse_sitemap(text, "http://a.example/s.txt")
    assert len(r.errors) == 101 and r.errors[-1] == "… and 400 more errors"


def test_rss_feed() -> None:
    rss = (
        b'<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>'
        b"<link>http://a.example/</link>"
        b"<item><link>http://a.example/post1</link>"
        b"<pubDate>Sat, 07 Sep 2002 09:42:31 GMT</pubDate></item>"
        b"<item><link>http://a.example/post2</link></item></channel></rss>"
    )
    r = parse_sitemap(rss, "http://a.example/feed.xml")
    assert r.kind == "rss"
    assert r.urls == [
        SitemapEntry("http://a.example/post1", _ts(2002, 9, 7, 9, 42, 31)),
        SitemapEntry("http://a.example/post2"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2005", _ts(2005, 1, 1)),
        ("2005-02", _ts(2005, 2, 1)),
        ("2005-02-03", _ts(2005, 2, 3)),
        ("2005-02-03T04:05Z", _ts(2005, 2, 3, 4, 5)),
        ("2005-02-03T04:05:06.5+02:00", _ts(2005, 2, 3, 2, 5, 6) + 0.5),
        ("Thu, 03 Feb 2005 04:05:06 GMT", _ts(2005, 2, 3, 4, 5, 6)),
        ("", None),
        ("2005-13", None),
        ("soon", None),
    ],
)
def test_parse_lastmod(text: str, expected: float | None) -> None:
    assert parse_lastmod(text) == expected
