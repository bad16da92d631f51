"""HTML parsing: link rules, base, robots directives, canonical, title, text, robustness."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtier.parse.html import (
    MAX_ANCHOR_CHARS,
    Link,
    ParsedPage,
    parse_html,
    robots_directives,
)

PAGE = "https://example.com/dir/sub/page.html?q=1"


def parse(html: str, url: str = PAGE, **kwargs: object) -> ParsedPage:
    return parse_html(html.encode(), url, **kwargs)  # type: ignore[arg-type]


def urls(page: ParsedPage) -> list[str]:
    return [link.url for link in page.links]


def test_links_grouped_by_kind_each_in_document_order() -> None:
    page = parse(
        '<html><head><link rel="next" href="/n"></head><body>'
        '<iframe src="/if"></iframe><a href="/a1">a</a>'
        '<map name="m"><area href="/ar" alt=""></map><a href="/a2">a</a>'
        '<link rel="prev" href="/p">'
        "</body></html>"
    )
    assert [(link.tag, link.url) for link in page.links] == [
        ("link", "https://example.com/n"),
        ("link", "https://example.com/p"),
        ("a", "https://example.com/a1"),
        ("a", "https://example.com/a2"),
        ("area", "https://example.com/ar"),
        ("iframe", "https://example.com/if"),
    ]


def test_frames_in_a_frameset() -> None:
    page = parse('<frameset><frame src="left.html"><frame src="/right"></frameset>')
    assert [(link.tag, link.url) for link in page.links] == [
        ("frame", "https://example.com/dir/sub/left.html"),
        ("frame", "https://example.com/right"),
    ]


@pytest.mark.parametrize(
    ("rel", "kept"),
    [
        ("alternate", True),
        ("next", True),
        ("prev", True),
        ("Alternate", True),
        ("alternate nofollow", True),
        ("stylesheet", False),
        ("icon", False),
        ("shortcut icon", False),
        ("alternate stylesheet", False),
        ("canonical", False),
        ("preload", False),
        ("", False),
    ],
)
def test_link_element_only_for_alternate_next_prev(rel: str, kept: bool) -> None:
    page = parse(f'<head><link rel="{rel}" href="/x"></head>')
    assert urls(page) == (["https://example.com/x"] if kept else [])


def test_elements_without_the_url_attribute_give_no_link() -> None:
    page = parse('<a name="top">t</a><iframe srcdoc="<p>x"></iframe><area alt=""><frame>')
    assert page.links == []


@pytest.mark.parametrize(
    "href",
    [
        "",
        "   ",
        "#",
        "#section",
        " #x ",
        "javascript:void(0)",
        "JavaScript:alert(1)",
        " java\tscript:alert(1)",
        "mailto:someone@example.com",
        "MAILTO:x@y",
        "tel:+15551234",
        "data:text/html,<p>x",
        "ftp://example.com/file",
        "about:blank",
        "http://",
        "https://exa mple.com/",
    ],
)
def test_unfollowable_hrefs_are_skipped(href: str) -> None:
    assert parse(f'<a href="{href}">x</a>').links == []


# (href, expected) resolved against PAGE = https://example.com/dir/sub/page.html?q=1
EQUIVALENCE = [
    ("other.html", "https://example.com/dir/sub/other.html"),
    ("./other.html", "https://example.com/dir/sub/other.html"),
    ("../other.html", "https://example.com/dir/other.html"),
    ("../../other.html", "https://example.com/other.html"),
    ("../../../../other.html", "https://example.com/other.html"),
    ("/abs/path", "https://example.com/abs/path"),
    ("//cdn.example.org/x?y=1", "https://cdn.example.org/x?y=1"),
    ("http://Other.Example.com:80/a/./b/../c", "http://other.example.com/a/c"),
    ("https://example.com/x#frag", "https://example.com/x#frag"),
    ("other.html#frag", "https://example.com/dir/sub/other.html#frag"),
    ("?q=2", "https://example.com/dir/sub/page.html?q=2"),
    (".", "https://example.com/dir/sub/"),
    ("..", "https://example.com/dir/"),
    ("  \n /trim/me \t", "https://example.com/trim/me"),
    ("/a b", "https://example.com/a%20b"),
    ("/caf\u00e9", "https://example.com/caf%C3%A9"),
]


@pytest.mark.parametrize(("href", "expected"), EQUIVALENCE)
def test_relative_forms_resolve_against_the_page(href: str, expected: str) -> None:
    assert urls(parse(f'<a href="{href}">x</a>')) == [expected]


def test_first_base_href_applies_to_all_links_even_earlier_ones() -> None:
    page = parse(
        '<a href="early">e</a><base href="/root/"><base href="https://ignored.example/">'
        '<a href="late">l</a>'
    )
    assert page.base_url == "https://example.com/root/"
    assert urls(page) == ["https://example.com/root/early", "https://example.com/root/late"]


def test_base_href_absolute_and_protocol_relative() -> None:
    page = parse('<base href="//mirror.example.net/m/"><a href="../x">x</a>')
    assert page.base_url == "https://mirror.example.net/m/"
    assert urls(page) == ["https://mirror.example.net/x"]


@pytest.mark.parametrize("href", ["javascript:alert(1)", "data:,x", "http://[bad", ""])
def test_unusable_base_falls_back_to_the_page_url(href: str) -> None:
    page = parse(f'<base href="{href}"><a href="x">x</a>')
    assert page.base_url == PAGE  # an empty href resolves to the page itself
    assert urls(page) == ["https://example.com/dir/sub/x"]


def test_base_without_href_is_ignored() -> None:
    page = parse('<base target="_blank"><base href="/b/"><a href="x">x</a>')
    assert urls(page) == ["https://example.com/b/x"]


def test_valueless_base_href_is_the_first_base_and_means_the_page_url() -> None:
    page = parse('<base href><base href="/b/"><a href="x">x</a>')
    assert page.base_url == PAGE
    assert urls(page) == ["https://example.com/dir/sub/x"]


def test_rel_nofollow_flags_the_link() -> None:
    page = parse(
        '<a href="/a" rel="NoFollow noopener">a</a><a href="/b" rel="noopener">b</a>'
        '<a href="/c">c</a>'
    )
    assert page.links == [
        Link("https://example.com/a", "a", "nofollow noopener", True, "a"),
        Link("https://example.com/b", "a", "noopener", False, "b"),
        Link("https://example.com/c", "a", "", False, "c"),
    ]


def test_links_carry_anchor_text_and_rel_tokens() -> None:
    page = parse(
        '<a href="/s" rel="Sponsored"> Buy  <b>now</b>\n</a><a href="/u" rel="ugc nofollow">c</a>'
        '<map><area href="/m" alt=" map  area "></map><a href="/e"><img src=x></a>'
        '<a href="/s">later text</a>'
    )
    assert [(link.url, link.anchor, link.rel) for link in page.links] == [
        ("https://example.com/s", "Buy now", "sponsored"),
        ("https://example.com/u", "c", "ugc nofollow"),
        ("https://example.com/e", "", ""),
        ("https://example.com/m", "map area", ""),
    ]


def test_a_folded_link_takes_the_first_non_empty_anchor_and_anchors_are_capped() -> None:
    long = "word " * 200
    page = parse(f'<a href="/x"></a><a href="/x">second</a><a href="/y">{long}</a>')
    assert page.links[0].anchor == "second"
    assert 0 < len(page.links[1].anchor) <= MAX_ANCHOR_CHARS


def test_html_lang_and_robots_meta_are_reported() -> None:
    page = parse('<html lang=" de-CH "><meta name=robots content="noarchive, max-snippet:20">'
                 '<meta name=other content=noindex>')
    assert page.lang == "de-CH"
    assert page.robots_meta == "noarchive, max-snippet:20"
    assert parse("<p>x").lang is None and parse("<p>x").robots_meta is None


def test_duplicates_fold_and_any_followable_occurrence_wins() -> None:
    page = parse(
        '<a href="/x" rel="nofollow">1</a><a href="/y">2</a><a href="https://example.com/x">3</a>'
        '<a href="/y" rel="nofollow">4</a>'
    )
    assert [(link.url, link.nofollow) for link in page.links] == [
        ("https://example.com/x", False),
        ("https://example.com/y", False),
    ]


def test_max_links_caps_the_list() -> None:
    html = "".join(f'<a href="/p{i}">{i}</a>' for i in range(50))
    page = parse(html, max_links=7)
    assert urls(page) == [f"https://example.com/p{i}" for i in range(7)]


@pytest.mark.parametrize(
    ("meta", "noindex", "nofollow"),
    [
        ('<meta name="robots" content="noindex">', True, False),
        ('<meta name="robots" content="nofollow">', False, True),
        ('<meta name="ROBOTS" content="NoIndex, NoFollow">', True, True),
        ('<meta name="robots" content="none">', True, True),
        ('<meta name="robots" content="index,follow">', False, False),
        ('<meta name="robots" content="noarchive , nofollow">', False, True),
        ('<meta name="courtier" content="noindex">', True, False),
        ('<meta name="Courtier" content="nofollow">', False, True),
        ('<meta name="googlebot" content="noindex, nofollow">', False, False),
        ('<meta name="description" content="nofollow">', False, False),
        ('<meta name="robots" content="noindex"><meta name=courtier content=nofollow>', True, True),
    ],
)
def test_meta_robots(meta: str, noindex: bool, nofollow: bool) -> None:
    page = parse(f'<head>{meta}</head><a href="/x">x</a>')
    assert (page.meta_noindex, page.meta_nofollow) == (noindex, nofollow)
    assert len(page.links) == (0 if nofollow else 1)


def test_agent_token_is_configurable() -> None:
    html = '<meta name="mybot" content="nofollow"><a href="/x">x</a>'
    assert parse(html).meta_nofollow is False
    assert parse(html, agent_token="MyBot").meta_nofollow is True


def test_nofollow_page_returns_no_links_but_keeps_canonical() -> None:
    page = parse(
        '<head><meta name="robots" content="nofollow"><link rel="canonical" href="/c">'
        '<link rel="next" href="/n"></head><a href="/x">x</a>'
    )
    assert page.links == []
    assert page.canonical == "https://example.com/c"


@pytest.mark.parametrize(
    ("header", "noindex", "nofollow"),
    [
        ("noindex", True, False),
        ("NOFOLLOW", False, True),
        ("none", True, True),
        ("noindex, nofollow", True, True),
        ("courtier: nofollow", False, True),
        ("Courtier: noindex, nofollow", True, True),
        ("googlebot: noindex, nofollow", False, False),
        ("googlebot: noindex, courtier: nofollow", False, True),
        ("courtier: nofollow, googlebot: noindex", False, True),
        ("unavailable_after: 25 Jun 2010 15:00:00 PST", False, False),
        ("unavailable_after: 25 Jun 2010 15:00:00 PST, noindex", True, False),
        ("max-snippet: 20, nofollow", False, True),
        ("noarchive\nnoindex", True, False),
        ("", False, False),
    ],
)
def test_x_robots_tag(header: str, noindex: bool, nofollow: bool) -> None:
    assert robots_directives(header, "courtier") == (noindex, nofollow)
    page = parse('<a href="/x">x</a>', x_robots_tag=header)
    assert (page.meta_noindex, page.meta_nofollow) == (noindex, nofollow)
    assert len(page.links) == (0 if nofollow else 1)


def test_canonical_is_absolute_and_first_wins() -> None:
    page = parse(
        '<head><base href="/base/"><link rel="canonical" href="canon?a=1#f">'
        '<link rel="canonical" href="/second"></head>'
    )
    assert page.canonical == "https://example.com/base/canon?a=1#f"
    assert page.links == []  # canonical is not an out-link


def test_canonical_missing_or_unusable() -> None:
    assert parse("<p>x</p>").canonical is None
    assert parse('<link rel="canonical" href="javascript:x">').canonical is None


def test_title() -> None:
    assert parse("<title>  Hello \n  World </title>").title == "Hello World"
    assert parse("<title>First</title><title>Second</title>").title == "First"
    assert parse("<p>no title</p>").title is None
    assert parse("<title>A &amp; B</title>").title == "A & B"


def test_visible_text_excludes_scripts_styles_and_noscript() -> None:
    page = parse(
        "<html><head><title>T</title><style>p{color:red}</style></head><body>"
        "<h1>Head  line</h1>\n\n<p>one\t<!-- hidden --><b>two</b></p>"
        "<script>var s = 'hidden';</script>"
        "<noscript>enable js</noscript><template><p>tpl</p></template><p>three</p></body></html>"
    )
    assert page.text == "Head line one two three"


def test_text_is_capped_and_optional() -> None:
    words = " ".join(f"w{i}" for i in range(1000))
    page = parse(f"<p>{words}</p>", max_text_chars=50)
    assert page.text == words[:50].rstrip()
    assert parse(f"<p>{words}</p>", want_text=False).text == ""
    assert parse(f"<p>{words}</p>", max_text_chars=0).text == ""


def test_whitespace_heavy_text_still_fills_the_cap() -> None:
    raw = "".join(f"<p>{' ' * 300}w{i}{chr(10) * 200}</p>" for i in range(300))
    page = parse(raw, max_text_chars=1000)
    expected = " ".join(f"w{i}" for i in range(300))[:1000].rstrip()
    assert page.text == expected


def test_encoding_from_http_header_decodes_title_and_links() -> None:
    html = '<title>Привет</title><a href="/путь">x</a>'.encode("cp1251")
    page = parse_html(html, PAGE, content_type="text/html; charset=windows-1251")
    assert page.encoding == "windows-1251"
    assert page.title == "Привет"
    assert urls(page) == ["https://example.com/%D0%BF%D1%83%D1%82%D1%8C"]


def test_encoding_from_meta_and_default() -> None:
    html = '<meta charset="iso-8859-2"><title>Łódź</title>'.encode("iso-8859-2")
    page = parse_html(html, PAGE)
    assert (page.encoding, page.title) == ("iso-8859-2", "Łódź")
    assert parse_html(b"<p>ascii</p>", PAGE).encoding == "windows-1252"
    assert parse_html("<p>é</p>".encode(), PAGE).encoding == "utf-8"
    assert parse_html("<title>é</title>".encode("cp1252"), PAGE).title == "é"


def test_invalid_utf8_never_raises() -> None:
    body = b'<meta charset="utf-8"><title>bad \xff\xfe title</title><a href="/x\xff">x</a>\x00'
    page = parse_html(body, PAGE)
    assert page.title == "bad \ufffd\ufffd title"
    assert urls(page) == ["https://example.com/x%EF%BF%BD"]


def test_invalid_page_url_gives_no_links_without_raising() -> None:
    page = parse('<a href="/x">x</a><a href="https://ok.example/">y</a>', url="not a url")
    assert urls(page) == ["https://ok.example/"]
    assert page.base_url == "not a url"


def test_malformed_markup_is_repaired_like_a_browser() -> None:
    page = parse("<a href=\"/one\"<a href=/two>x<p><a href='/three'>y</td></tr></table>")
    assert "https://example.com/three" in urls(page)


def test_five_megabyte_single_line_page() -> None:
    chunk = '<div class="c"><a href="/p{}">link</a> some words here </div>'
    body = "<html><body>" + "".join(chunk.format(i) for i in range(80_000)) + "</body></html>"
    data = body.encode()
    assert len(data) > 5_000_000 and b"\n" not in data
    page = parse_html(data, PAGE, max_links=10_000, max_text_chars=200_000)
    assert len(page.links) == 10_000
    assert page.links[-1].url == "https://example.com/p9999"
    assert 0 < len(page.text) <= 200_000
    assert page.text.startswith("link some words here link")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4000), st.one_of(st.none(), st.text(max_size=40)))
def test_random_bytes_never_raise(body: bytes, header: str | None) -> None:
    page = parse_html(body, PAGE, content_type=header, x_robots_tag=header)
    assert isinstance(page, ParsedPage)
    for link in page.links:
        assert link.url.startswith(("http://", "https://"))


TAG_SOUP = st.lists(
    st.sampled_from(
        [
            "<a href=",
            '"',
            "'",
            "/x",
            "../y",
            "#f",
            "javascript:x",
            "<base href=/b/>",
            "<meta name=robots content=",
            "nofollow",
            "<link rel=next href=",
            "<title>",
            "</title>",
            "<script>",
            "</script>",
            ">",
            "<",
            "&amp;",
            "\x00",
            "\ufffd",
            "é",
            "<iframe src=",
            "<!--",
            "-->",
            " ",
            "<frameset>",
            "<frame src=",
        ]
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(TAG_SOUP)
def test_tag_soup_never_raises(parts: list[str]) -> None:
    page = parse_html("".join(parts).encode(), PAGE)
    assert all(link.url.startswith("https://") for link in page.links)
    assert page.meta_nofollow or page.base_url.startswith("https://example.com/")


RESOLVER_BASES = [
    PAGE,
    "https://example.com",
    "http://Example.COM:80/a/b/",
    "https://user:pw@example.com:8443/x/y.html?q=1#frag",
    "http://[::1]:8080/dir/file",
    "https://example.com/a/./b/../c?x",
    "https://xn--caf-dma.example/%7Euser/",
    "not a url",
]
REF_PIECES = st.sampled_from(
    [
        "/",
        "//",
        ".",
        "..",
        "%2e",
        "%2E",
        "%20",
        "?",
        "#",
        ":",
        "a",
        "B",
        "1",
        "-",
        "_",
        "~",
        "@",
        "'",
        " ",
        "\\",
        "\t",
        "=",
        "&",
        "%",
        "x.html",
        "https://example.com/",
        "http://example.com:80/",
        "https://user:pw@example.com:8443/",
        "http://other.test:8080/p/1.html",
        "https://xn--e1a.test/",
        "HTTP://Other.test/",
        "#s1",
        "mailto:",
        "é",
        "|",
        "^",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(RESOLVER_BASES), st.lists(REF_PIECES, min_size=1, max_size=8))
def test_resolver_fast_path_agrees_with_ada(base: str, pieces: list[str]) -> None:
    from courtier.parse.html import _http_join, _Resolver

    ref = "".join(pieces)
    assert _Resolver(base)(ref) == _http_join(base, ref)


@pytest.mark.parametrize("base", RESOLVER_BASES[:-1])
@pytest.mark.parametrize(
    "ref", ["/a/b?c=1#d", "page.html", "sub/page.html?x=1", "?q=2", "https://example.com/z",
            "http://other.test:8080/p/1.html#s1", "https://example.org/a?b=1#", "http://a.b/#x%"]
)
def test_resolver_fast_path_common_refs(base: str, ref: str) -> None:
    from ada_url import join_url

    from courtier.parse.html import _Resolver

    assert _Resolver(base)(ref) == join_url(base, ref)


def test_absolute_links_in_normal_form_skip_ada(monkeypatch: pytest.MonkeyPatch) -> None:
    from courtier.parse import html

    def no_ada(base: str, ref: str) -> str | None:
        raise AssertionError(f"{ref} went to ada")

    resolve = html._Resolver("http://h.test:8080/p/1.html")
    monkeypatch.setattr(html, "_http_join", no_ada)
    for ref in ("http://other.test:8080/p/2.html#s1", "https://x.example/a?b=1"):
        assert resolve(ref) == ref
