"""Property tests for :func:`courtier.parse.sitemaps.parse_sitemap` (hypothesis).

The example-based cases (vectors, bombs, DTDs, feeds…) are in ``test_sitemaps.py``;
these check the general contract on generated input:

* any bytes, under any sitemap URL and limits: no exception, at most ``max_urls``
  entries, every entry a canonical absolute http(s) URL on the sitemap's host
  (unless ``allow_cross_host``);
* generated urlsets and indexes: exactly the in-scope locs, in canonical form and
  document order, one error per refused loc, cut at ``max_urls``;
* a text sitemap keeps the same URLs as the urlset with the same locs;
* gzip (one member or several) of a document parses as the plain document does.

Text sitemaps end lines only at CR, LF and CRLF (not at VT, FF, NEL, U+2028…).
"""

from __future__ import annotations

import gzip
import itertools
from xml.sax.saxutils import escape

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtier.core.errors import InvalidURL
from courtier.core.urls import canonicalize
from courtier.parse.sitemaps import SitemapResult, parse_sitemap

# Sitemap URLs, some spelled non-canonically (case, default port, IDN, IPv6, userinfo),
# each with other spellings of its own host, for locs that are in scope.
SITES: dict[str, list[str]] = {
    "http://a.example/sitemap.xml": [
        "http://a.example",
        "HTTP://A.EXAMPLE:80",
        " http://a.example",
    ],
    "https://A.Example:443/maps/sitemap.xml.gz": ["https://a.example", "https://a.example:443"],
    "http://a.example:8080/s.txt": ["http://a.example:8080", "http://user@A.example:8080"],
    "http://bücher.example/sitemap.xml": ["http://xn--bcher-kva.example", "http://BÜCHER.example"],
    "http://[::1]:8000/sitemap.xml": ["http://[0:0::1]:8000", "http://[::0001]:8000"],
    "https://user:pw@a.example/s.xml": ["https://a.example", "https://x:y@a.example:443"],
    "not a url": [],
}
SITEMAP_URLS = list(SITES)

# Authorities that are another host, port or scheme, or no valid http(s) URL at all.
OTHER_PREFIXES = [
    "https://a.example",
    "http://a.example:8080",
    "http://a.example.",
    "http://b.example",
    "http://sub.a.example",
    "http://[::2]:8000",
    "//a.example",
    "ftp://a.example",
    "mailto:x@a.example",
    "javascript:",
    "http://",
    "http://a b.example",
    "",
]

# Path and query pieces, odd characters included (XML-escaped when put in a document).
# Joined from a list rather than drawn as one st.text alphabet, so that the odd ones
# are not drowned in the whole Unicode range.
ODD = " %<>&\"'#?/\\.:;=+@!~*()[]{}|^`\t\né€😀\u00a0\u200b\ufeff\u2028\u0085"
PIECES = st.one_of(
    st.sampled_from([*ODD, "%2e", "%7E", "%zz", "..", "./", "?a=1&b=2", "#frag", "&amp;"]),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Cn")), max_size=3),
)
TAILS = st.lists(PIECES, max_size=10).map(
    lambda pieces: tail if (tail := "".join(pieces))[:1] == "/" else "/" + tail
)


# Line boundaries of str.splitlines() (text sitemaps): more than "\n", "\r\n" and "\r".
LINE_BOUNDARIES = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def locs_for(url: str, max_size: int = 12) -> st.SearchStrategy[list[str]]:
    """Locs for a sitemap at ``url``: mostly on its own host (in various spellings)."""
    own = SITES.get(url) or OTHER_PREFIXES
    prefixes = st.one_of(
        st.sampled_from(own), st.sampled_from(own), st.sampled_from(OTHER_PREFIXES)
    )
    loc = st.builds(lambda prefix, tail: prefix + tail, prefixes, TAILS)
    return st.lists(loc, max_size=max_size)


def sitemap_and_locs(max_size: int = 12) -> st.SearchStrategy[tuple[str, list[str]]]:
    return st.sampled_from(SITEMAP_URLS).flatmap(
        lambda url: st.tuples(st.just(url), locs_for(url, max_size))
    )


def _host_key(url: str) -> str | None:
    try:
        return canonicalize(url).host_key
    except InvalidURL:
        return None


def _expected(loc: str, sitemap_url: str, allow_cross_host: bool) -> str | None:
    """The canonical loc when in scope, None when it must be refused."""
    try:
        canon = canonicalize(loc.strip())
    except InvalidURL:
        return None
    if not allow_cross_host and canon.host_key != _host_key(sitemap_url):
        return None
    return canon.url


def _check_invariants(
    result: SitemapResult, sitemap_url: str, max_urls: int, allow_cross_host: bool
) -> None:
    assert isinstance(result, SitemapResult)
    locs = [entry.loc for entry in result.urls] + result.sitemaps
    assert len(locs) <= max_urls
    assert len(result.errors) <= 101
    home = _host_key(sitemap_url)
    for loc in locs:
        canon = canonicalize(loc)  # raises (fails the test) unless a valid http(s) URL
        assert canon.url == loc, "entries are returned in canonical form"
        assert canon.scheme in ("http", "https")
        if not allow_cross_host:
            assert canon.host_key == home
    for entry in result.urls:
        assert entry.priority is None or 0.0 <= entry.priority <= 1.0


def _urlset(locs: list[str], root: str = "urlset", entry: str = "url") -> bytes:
    body = "".join(f"<{entry}><loc>{escape(loc)}</loc></{entry}>" for loc in locs)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<{root} xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{body}</{root}>'
    ).encode()


def _gzip_members(data: bytes, cuts: list[int]) -> bytes:
    """``data`` as concatenated gzip members, split at ``cuts``."""
    bounds = [0, *sorted({min(c, len(data)) for c in cuts}), len(data)]
    return b"".join(gzip.compress(data[lo:hi], mtime=0) for lo, hi in itertools.pairwise(bounds))


# --- any input ----------------------------------------------------------------------------

XML_SOUP = st.lists(
    st.sampled_from(
        [
            '<?xml version="1.0"?>',
            "<urlset>",
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">',
            "</urlset>",
            "<sitemapindex>",
            "</sitemapindex>",
            "<url>",
            "</url>",
            "<sitemap>",
            "</sitemap>",
            "<loc>",
            "</loc>",
            "<lastmod>2024-02-30</lastmod>",
            "<priority>NaN</priority>",
            "<priority>0.5</priority>",
            "<changefreq>Daily</changefreq>",
            "<rss>",
            "<item>",
            "</item>",
            "<link>",
            "</link>",
            "<feed>",
            "<entry>",
            "</entry>",
            '<link rel="alternate" href="http://a.example/f"/>',
            '<x:url xmlns:x="urn:x">',
            "</x:url>",
            "<!DOCTYPE x>",
            '<!ENTITY e "x">',
            "&amp;",
            "&e;",
            "<![CDATA[http://a.example/c]]>",
            "http://a.example/p",
            "http://b.example/q",
            "https://A.example:443/%7e",
            "\n",
            " ",
            "\x00",
            "\ufeff",
            "é",
        ]
    ),
    max_size=50,
)


@settings(max_examples=300, deadline=None)
@given(
    body=st.one_of(
        st.binary(max_size=3000),
        XML_SOUP.map(lambda parts: "".join(parts).encode()),
        st.binary(max_size=200).map(lambda tail: b"\x1f\x8b" + tail),
        st.binary(max_size=200).map(lambda tail: b"\xef\xbb\xbf<" + tail),
    ),
    url=st.one_of(st.sampled_from(SITEMAP_URLS), st.text(max_size=40)),
    max_urls=st.integers(min_value=1, max_value=20),
    max_bytes=st.integers(min_value=1, max_value=5000),
    allow_cross_host=st.booleans(),
    strict_path=st.booleans(),
)
def test_any_bytes_never_raise_and_respect_scope_and_caps(
    body: bytes,
    url: str,
    max_urls: int,
    max_bytes: int,
    allow_cross_host: bool,
    strict_path: bool,
) -> None:
    result = parse_sitemap(
        body,
        url,
        max_urls,
        max_bytes,
        allow_cross_host=allow_cross_host,
        strict_path=strict_path,
    )
    _check_invariants(result, url, max_urls, allow_cross_host)


# --- generated urlsets and indexes -------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    site=sitemap_and_locs(),
    max_urls=st.integers(min_value=1, max_value=15),
    allow_cross_host=st.booleans(),
    index=st.booleans(),
)
def test_generated_documents_keep_exactly_the_in_scope_locs(
    site: tuple[str, list[str]], max_urls: int, allow_cross_host: bool, index: bool
) -> None:
    url, locs = site
    root, entry = ("sitemapindex", "sitemap") if index else ("urlset", "url")
    result = parse_sitemap(
        _urlset(locs, root, entry), url, max_urls, allow_cross_host=allow_cross_host
    )
    _check_invariants(result, url, max_urls, allow_cross_host)
    assert result.kind == root
    expected: list[str] = []
    refused = 0
    truncated = False
    for loc in locs:
        if len(expected) == max_urls:
            truncated = True
            break
        canonical = _expected(loc, url, allow_cross_host)
        if canonical is None:
            refused += 1
        else:
            expected.append(canonical)
    got = result.sitemaps if index else [e.loc for e in result.urls]
    assert got == expected
    assert (result.urls if index else result.sitemaps) == []
    assert result.truncated == truncated
    assert len(result.errors) == refused + truncated  # one per refused loc, one for the cut


@settings(max_examples=100, deadline=None)
@given(
    site=sitemap_and_locs(),
    max_urls=st.integers(min_value=1, max_value=15),
)
def test_text_sitemap_agrees_with_the_urlset(site: tuple[str, list[str]], max_urls: int) -> None:
    """A plain-text sitemap (one loc per line) keeps the same URLs as the XML one."""
    url, locs = site
    # blank lines are skipped without an error in text (an empty <loc> is one), and locs
    # with CR or LF are several lines
    locs = [loc for loc in locs if loc.strip() and not set(loc) & set("\r\n")]
    text = parse_sitemap("\n".join(locs).encode(), url, max_urls)
    xml = parse_sitemap(_urlset(locs), url, max_urls)
    _check_invariants(text, url, max_urls, False)
    assert text.kind == "text"
    assert text.urls == xml.urls
    assert text.truncated == xml.truncated


@pytest.mark.parametrize("boundary", ["\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029"])
def test_text_sitemap_lines_end_only_at_newlines(boundary: str) -> None:
    loc = f"http://a.example/x{boundary}y"
    body = f"{loc}\nnot a url\n".encode()
    result = parse_sitemap(body, "http://a.example/s.txt")
    assert [e.loc for e in result.urls] == [canonicalize(loc).url]
    assert [e.split(":")[0] for e in result.errors] == ["line 2"]


# --- gzip ---------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    site=sitemap_and_locs(10),
    max_urls=st.integers(min_value=1, max_value=15),
    index=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=3),
)
def test_gzip_parses_like_the_plain_document(
    site: tuple[str, list[str]], max_urls: int, index: bool, cuts: list[int]
) -> None:
    url, locs = site
    root, entry = ("sitemapindex", "sitemap") if index else ("urlset", "url")
    plain = _urlset(locs, root, entry)
    expected = parse_sitemap(plain, url, max_urls)
    for packed in (gzip.compress(plain), _gzip_members(plain, cuts)):
        assert parse_sitemap(packed, url, max_urls) == expected
