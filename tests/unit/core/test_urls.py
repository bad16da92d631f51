"""Tests of URL canonicalization, keys, shards and registrable domains."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
import xxhash
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from courtier.core.errors import InvalidURL
from courtier.core.urls import (
    MAX_URL_LENGTH,
    SHARD_COUNT,
    CanonicalUrl,
    canonicalize,
    host_key_of,
    make_url_key,
    registrable_domain,
    server_of,
    shard_of,
    shard_of_key,
)
from tests.conftest import conformance_file

UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _reference_canonical(href: str) -> str:
    """Our documented changes applied to a WHATWG href, written independently.

    Drops userinfo and fragment and an empty query, decodes escapes of
    unreserved characters and upper-cases the hex of the others.
    """
    parts = urlsplit(href)
    netloc = parts.netloc.rpartition("@")[2]
    tail = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def fix(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in UNRESERVED else "%" + match.group(1).upper()

    return f"{parts.scheme}://{netloc}" + re.sub(r"%([0-9A-Fa-f]{2})", fix, tail)


def _wpt_cases() -> list[dict[str, Any]]:
    path = conformance_file("url/urltestdata.json")
    return [case for case in json.loads(path.read_text("utf-8")) if isinstance(case, dict)]


# --- WHATWG conformance -------------------------------------------------------


def test_wpt_http_cases_match_documented_canonical_form() -> None:
    cases = [
        c
        for c in _wpt_cases()
        if not c.get("failure") and c["href"].startswith(("http:", "https:"))
    ]
    mismatches: list[tuple[str, ...]] = []
    for case in cases:
        try:
            got = canonicalize(case["input"], case["base"])
        except InvalidURL as exc:
            mismatches.append((case["input"], case["base"], f"raised {exc}"))
            continue
        hostname = case["hostname"].strip("[]")
        port = int(case["port"]) if case["port"] else None
        expected = _reference_canonical(case["href"])
        if (got.url, got.host, got.port, got.scheme) != (
            expected,
            hostname,
            port,
            case["protocol"][:-1],
        ):
            mismatches.append((case["input"], case["base"], got.url, expected))
    assert mismatches == []
    # 247 http(s) success cases in the vendored WPT file; guard against the
    # selection silently shrinking to nothing.
    assert len(cases) >= 200


def test_wpt_failure_cases_raise_invalid_url() -> None:
    failures = [c for c in _wpt_cases() if c.get("failure")]
    accepted = []
    for case in failures:
        try:
            got = canonicalize(case["input"], case["base"])
        except InvalidURL:
            continue
        accepted.append((case["input"], case["base"], got.url))
    assert accepted == []
    assert len(failures) >= 200


def test_wpt_non_http_successes_are_rejected() -> None:
    others = [
        c
        for c in _wpt_cases()
        if not c.get("failure") and not c["href"].startswith(("http:", "https:"))
    ]
    for case in others:
        with pytest.raises(InvalidURL):
            canonicalize(case["input"], case["base"])
    assert len(others) >= 100


# --- equivalent forms ---------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("HTTP://Example.COM:80/a/./b/../c#x", "http://example.com/a/c"),
        ("http://example.com/%7euser/%7Ebob", "http://example.com/~user/~bob"),
        ("http://example.com/~user", "http://example.com/~user"),
        ("http://example.com/%41%62%2D%2e%5F", "http://example.com/Ab-._"),
        ("http://example.com/a%2fb%3a?q=%2f%3d", "http://example.com/a%2Fb%3A?q=%2F%3D"),
        ("http://example.com/caf%c3%a9", "http://example.com/caf%C3%A9"),
        ("http://example.com/café", "http://example.com/caf%C3%A9"),
        ("http://example.com/100%", "http://example.com/100%"),
        ("http://example.com/%zz%4", "http://example.com/%zz%4"),
        ("http://example.com:80", "http://example.com/"),
        ("https://example.com:443/", "https://example.com/"),
        ("http://example.com:443/", "http://example.com:443/"),
        ("https://example.com:80/", "https://example.com:80/"),
        ("http://Bücher.Example/", "http://xn--bcher-kva.example/"),
        ("http://xn--bcher-kva.example/", "http://xn--bcher-kva.example/"),
        ("http://user:secret@example.com/p", "http://example.com/p"),
        ("http://example.com/p?", "http://example.com/p"),
        ("http://example.com/p?#frag", "http://example.com/p"),
        ("http://example.com/p??", "http://example.com/p??"),
        ("  \t http://example.com/p \n", "http://example.com/p"),
        ("http://exa\tmple.com/p", "http://example.com/p"),
        ("http://example.com/a/%2e%2E/b", "http://example.com/b"),
        ("http://example.com/a\\b", "http://example.com/a/b"),
        ("http://[0:0::1]:8080/x", "http://[::1]:8080/x"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
    ],
)
def test_equivalent_forms(raw: str, expected: str) -> None:
    assert canonicalize(raw).url == expected


def test_query_parameter_order_is_kept() -> None:
    a = canonicalize("http://example.com/s?b=2&a=1")
    b = canonicalize("http://example.com/s?a=1&b=2")
    assert a.url == "http://example.com/s?b=2&a=1"
    assert a.url != b.url
    assert a.url_key != b.url_key


def test_relative_resolution_against_base() -> None:
    base = "https://Example.com/dir/page.html?x=1#top"
    assert canonicalize("../other?q", base).url == "https://example.com/other?q"
    assert canonicalize("#frag", base).url == "https://example.com/dir/page.html?x=1"
    assert canonicalize("//cdn.test/a", base).url == "https://cdn.test/a"
    assert canonicalize("http://abs.test/", base).url == "http://abs.test/"
    assert canonicalize("?y=2", base).url == "https://example.com/dir/page.html?y=2"
    assert canonicalize("", base).url == "https://example.com/dir/page.html?x=1"


def test_fields_host_port_host_key_and_path_and_query() -> None:
    c = canonicalize("HTTPS://A.Test:8443/x/%7e?q=%2f#f")
    assert c == CanonicalUrl(
        url="https://a.test:8443/x/~?q=%2F",
        scheme="https",
        host="a.test",
        port=8443,
        host_key="https://a.test:8443",
        url_key=make_url_key("https://a.test:8443", "https://a.test:8443/x/~?q=%2F"),
        shard=shard_of("https://a.test:8443"),
    )
    assert c.path_and_query == "/x/~?q=%2F"
    assert c.effective_port == 8443
    d = canonicalize("http://example.com")
    assert (d.host_key, d.port, d.effective_port, d.path_and_query) == (
        "http://example.com",
        None,
        80,
        "/",
    )
    assert canonicalize("https://example.com/").effective_port == 443
    v6 = canonicalize("http://[2001:DB8::1]:81/p")
    assert (v6.host, v6.host_key) == ("2001:db8::1", "http://[2001:db8::1]:81")
    assert host_key_of("HTTP://Example.com:80/anything?x") == "http://example.com"


def test_canonical_url_is_frozen() -> None:
    c = canonicalize("http://example.com/")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.url = "http://other.test/"  # type: ignore[misc]
    assert hash(c) == hash(canonicalize("http://EXAMPLE.com:80/#x"))


# --- keys and shards ----------------------------------------------------------


def test_url_key_locality_same_host_same_prefix() -> None:
    urls = [f"http://example.com/page/{i}?x={i}" for i in range(50)]
    keys = [canonicalize(u).url_key for u in urls]
    assert all(len(k) == 16 for k in keys)
    assert len({k[:4] for k in keys}) == 1
    assert len(set(keys)) == 50
    others = {canonicalize(f"http://host{i}.test/").url_key[:4] for i in range(50)}
    assert len(others) == 50
    # the prefix is the server's (the host name's): every scheme and port of one name
    # shares it, so one owner holds the server's politeness clock (docs/fetch.md)
    for twin in ("https://example.com/", "http://example.com:8080/", "https://EXAMPLE.com:1/"):
        assert canonicalize(twin).url_key[:4] == keys[0][:4]
        assert canonicalize(twin).shard == canonicalize(urls[0]).shard
    assert canonicalize("http://www.example.com/").url_key[:4] != keys[0][:4]


def test_server_of_drops_scheme_port_and_brackets() -> None:
    assert server_of("https://a.example:8443") == "a.example"
    assert server_of("http://a.example") == "a.example"
    assert server_of("a.example:81") == "a.example"
    assert server_of("http://[::1]:8080") == "::1" == canonicalize("http://[::1]:8080/").host
    assert server_of("http://192.0.2.1:81") == "192.0.2.1"
    for url in ("https://b.test:9/x", "http://[2001:db8::1]/", "http://10.0.0.1/"):
        c = canonicalize(url)
        assert server_of(c.host_key) == c.host


def test_url_key_matches_make_url_key_and_is_stable() -> None:
    c = canonicalize("http://example.com/")
    assert c.url_key == make_url_key("http://example.com", "http://example.com/")
    # Fixed values: a change of hash function or layout must be deliberate
    # (it changes every key in every existing store).
    assert c.url_key[:4] == xxhash.xxh3_64_digest(b"example.com")[:4]
    assert c.url_key[4:] == xxhash.xxh3_128_digest(b"http://example.com/")[:12]
    assert c.url_key.hex() == "8b66107e42663426682770e605cd77c9"


def test_shard_stability_fixed_values() -> None:
    assert SHARD_COUNT == 1024
    # The leading 10 bits of xxh3_64(host name): 0x8b66… -> 0b1000101101 = 557.
    assert shard_of("http://example.com") == 557 == shard_of("https://example.com:8443")
    assert shard_of("https://www.example.com") == 260
    assert shard_of("http://example.com", 16) == 557 >> 6
    assert canonicalize("http://example.com/x").shard == 557


def test_shard_is_the_leading_bits_of_every_url_key_of_the_host() -> None:
    for i in range(500):
        c = canonicalize(f"http://host-{i}.test/page/{i * 7}?q={i}")
        assert shard_of_key(c.url_key) == c.shard == shard_of(c.host_key)
        assert shard_of_key(c.url_key, 64) == shard_of(c.host_key, 64) == c.shard >> 4
    assert shard_of_key(bytes.fromhex("ffc0" + "00" * 14)) == 1023
    assert shard_of_key(bytes.fromhex("003f" + "ff" * 14)) == 0


def test_shards_spread_over_all_shards() -> None:
    counts = [0] * SHARD_COUNT
    for i in range(20_000):
        counts[shard_of(f"http://host-{i}.test")] += 1
    assert min(counts) > 0
    assert max(counts) < 60  # mean is ≈19.5


def test_shard_of_rejects_counts_that_are_not_powers_of_two() -> None:
    for bad in (0, -4, 1000, 3):
        with pytest.raises(InvalidURL):
            shard_of("http://example.com", bad)
        with pytest.raises(InvalidURL):
            shard_of_key(b"\x00" * 16, bad)
    assert shard_of("http://example.com", 1) == 0


# --- rejections ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "fragment_of_message"),
    [
        ("ftp://example.com/file", "'ftp'"),
        ("javascript:alert(1)", "'javascript'"),
        ("mailto:someone@example.com", "'mailto'"),
        ("data:text/html,<p>hi</p>", "'data'"),
        ("file:///etc/passwd", "'file'"),
        ("", "empty"),
        ("   \t\n", "empty"),
        ("/relative/path", "no base"),
        ("http://", "WHATWG"),
        ("http://exa mple.com/", "WHATWG"),
        ("http://[::1/", "WHATWG"),
        ("http://example.com:99999/", "WHATWG"),
        ("http://a/\ud800", "WHATWG"),
    ],
)
def test_invalid_urls_raise_with_reason(raw: str, fragment_of_message: str) -> None:
    with pytest.raises(InvalidURL) as info:
        canonicalize(raw)
    assert fragment_of_message in str(info.value)


def test_non_http_result_of_relative_resolution_is_rejected() -> None:
    with pytest.raises(InvalidURL, match="only http and https"):
        canonicalize("mailto:x@example.com", "http://example.com/")
    with pytest.raises(InvalidURL):
        canonicalize("page", "ftp://example.com/dir/")


def test_length_limit() -> None:
    prefix = "http://example.com/"
    exact = prefix + "a" * (MAX_URL_LENGTH - len(prefix))
    assert canonicalize(exact).url == exact
    with pytest.raises(InvalidURL, match="longer than"):
        canonicalize(exact + "b")
    # the limit applies to the canonical form: escaping can make it grow
    with pytest.raises(InvalidURL, match="longer than"):
        canonicalize(prefix + "é" * 400)
    # surrounding whitespace that WHATWG strips does not count
    assert canonicalize("  " * 100 + exact).url == exact


# --- properties ---------------------------------------------------------------

_LABEL = st.from_regex(r"[a-zA-Z0-9]([a-zA-Z0-9-]{0,8}[a-zA-Z0-9])?", fullmatch=True) | (
    st.sampled_from(["Bücher", "例え", "xn--bcher-kva", "ÉCOLE", "straße"])
)
_HOST = (
    st.lists(_LABEL, min_size=1, max_size=4).map(".".join)
    | st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
    | st.sampled_from(["[::1]", "[2001:DB8:0:0::1]", "[::ffff:1.2.3.4]"])
)
_PIECE = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="#?/"), max_size=6
) | st.sampled_from([".", "..", "%2e", "%2E%2e", "%7e", "%7E", "%41", "%zz", "%", "%c3%a9", "%2F"])
_PATH = st.lists(_PIECE, max_size=5).map(lambda s: "/" + "/".join(s))
_QUERY = st.none() | st.lists(_PIECE, max_size=4).map(lambda s: "?" + "&".join(s))
_URL = st.builds(
    lambda scheme, userinfo, host, port, path, query, frag: (
        f"{scheme}://{userinfo}{host}{port}{path}{query or ''}{frag}"
    ),
    st.sampled_from(["http", "https", "HTTP", "hTTpS"]),
    st.sampled_from(["", "user@", "u:p@"]),
    _HOST,
    st.none().map(lambda _: "") | st.integers(0, 65535).map(lambda p: f":{p}"),
    _PATH,
    _QUERY,
    st.sampled_from(["", "#", "#frag", "#a?b"]),
)


def _check_canonical_shape(c: CanonicalUrl) -> None:
    assert c.url.startswith(c.host_key + "/")
    assert "#" not in c.url
    assert "@" not in c.host_key
    assert not c.url.endswith("?") or c.path_and_query.count("?") > 1
    for escape in re.findall(r"%([0-9A-Fa-f]{2})", c.url):
        assert escape == escape.upper()
        assert chr(int(escape, 16)) not in UNRESERVED
    assert len(c.url) <= MAX_URL_LENGTH


@settings(max_examples=300, deadline=None)
@given(_URL)
def test_canonicalize_is_idempotent(raw: str) -> None:
    try:
        first = canonicalize(raw)
    except InvalidURL:
        assume(False)
        raise
    second = canonicalize(first.url)
    assert second == first
    _check_canonical_shape(first)


@settings(max_examples=200, deadline=None)
@given(_PATH, _QUERY, st.sampled_from(["http://Base.test/d/p?x#y", "https://[::1]:9/a/b/"]))
def test_relative_references_are_idempotent(path: str, query: str | None, base: str) -> None:
    try:
        first = canonicalize(path.lstrip("/") + (query or ""), base)
    except InvalidURL:
        assume(False)
        raise
    assert canonicalize(first.url) == first
    _check_canonical_shape(first)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.sampled_from(["", "http://", "https://x.test/", "HTTP://a/"]))
def test_arbitrary_text_only_ever_raises_invalid_url(text: str, prefix: str) -> None:
    try:
        c = canonicalize(prefix + text)
    except InvalidURL:
        return
    assert canonicalize(c.url) == c
    _check_canonical_shape(c)


# --- registrable domains ------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("www.example.com", "example.com"),
        ("a.b.c.example.com", "example.com"),
        ("example.com", "example.com"),
        ("www.example.co.uk", "example.co.uk"),
        ("news.bbc.co.uk", "bbc.co.uk"),
        ("WWW.Example.COM.", "example.com"),
        ("user.github.io", "user.github.io"),
        ("deep.user.github.io", "user.github.io"),
        ("www.xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("com", "com"),
        ("localhost", "localhost"),
        ("a.b.unknown-tld-zz", "b.unknown-tld-zz"),
        ("192.168.1.10", "192.168.1.10"),
        ("2001:db8::1", "2001:db8::1"),
        ("[2001:db8::1]", "[2001:db8::1]"),
    ],
)
def test_registrable_domain(host: str, expected: str) -> None:
    assert registrable_domain(host) == expected


def test_suffix_list_has_the_rules_of_the_library_default() -> None:
    # urls._suffix_list builds the punycode rules itself (only the non-ASCII ones need
    # encoding): the rule set must be exactly what PublicSuffixList() builds
    from publicsuffixlist import PublicSuffixList

    from courtier.core import urls

    ours, theirs = urls._suffix_list(), PublicSuffixList()
    assert ours._publicsuffix == theirs._publicsuffix
    assert ours._maxlabel == theirs._maxlabel
    assert any(rule.startswith("xn--") for rule in ours._publicsuffix)


@pytest.mark.parametrize("host", [
    "www.xn--bcher-kva.de",          # punycode under an ASCII suffix
    "shop.xn--fiqs8s",               # 中国 (an IDN TLD)
    "a.b.xn--fiqs8s",
    "www.city.kawasaki.jp",          # an exception rule (!city.kawasaki.jp)
    "x.y.kawasaki.jp",               # a wildcard rule (*.kawasaki.jp)
    "a.xn--55qx5d.cn",               # 公司.cn
])
def test_registrable_domain_agrees_with_the_library_default(host: str) -> None:
    from publicsuffixlist import PublicSuffixList

    assert registrable_domain(host) == PublicSuffixList().privatesuffix(host)


def test_registrable_domain_groups_hosts_of_a_site() -> None:
    hosts = [canonicalize(u).host for u in ("http://a.shop.co.uk/", "https://B.shop.co.uk/x")]
    assert {registrable_domain(h) for h in hosts} == {"shop.co.uk"}
    assert registrable_domain("other.co.uk") != registrable_domain("shop.co.uk")
