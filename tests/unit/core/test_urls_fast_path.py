"""canonicalize's fast path: a string it accepts as already normalized is exactly
what ada's normalize_url returns for it (property test), and it changes no result."""

from __future__ import annotations

from ada_url import normalize_url
from hypothesis import given, settings
from hypothesis import strategies as st

from courtier.core.errors import InvalidURL
from courtier.core.urls import canonicalize, is_plain_absolute

HOST_CHARS = "abcxyz019-.XN"
PATH_CHARS = "aZ09-._~/!$&()*+,;=:@?%#'\\ |^[]{}\"<>`\t\u00e9"


@st.composite
def near_plain_urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "ftp"]))
    host = draw(st.text(HOST_CHARS, min_size=0, max_size=14))
    port = draw(st.sampled_from(["", "", "", ":80", ":443", ":8080", ":", ":0", ":08080",
                                 ":65535", ":65536", ":99999", ":123456", ":1a"]))
    path = draw(st.text(PATH_CHARS, max_size=24))
    segments = draw(st.lists(st.sampled_from(["", ".", "..", "a", ".a", "..b", "%2e"]),
                             max_size=4))
    return f"{scheme}://{host.lower() if draw(st.booleans()) else host}{port}/" + \
        "/".join(segments) + path


@settings(max_examples=3000, deadline=None)
@given(near_plain_urls())
def test_accepted_strings_are_already_normalized(url: str) -> None:
    if is_plain_absolute(url):
        assert normalize_url(url) == url


def test_typical_links_take_the_fast_path_and_canonicalize_as_before() -> None:
    for url in ["http://h0001.bench.test/p/1.html", "https://a.example.org/x?q=1&r=../s",
                "http://a.com/?", "http://h0001.bench.test:8080/p/1.html", "https://a.com:80/",
                "http://a.com:443/x", "http://a.com:65535/"]:
        assert is_plain_absolute(url), url
    assert canonicalize("http://a.com/?").url == "http://a.com/"
    assert canonicalize("http://h1.test/p/1.html").url == "http://h1.test/p/1.html"


def test_forms_ada_would_change_are_left_to_ada() -> None:
    for url in ["http://A.com/", "http://a.com:80/", "http://a.com/a/../b", "http://a.com/a/.",
                "http://1.2.3.4/", "http://xn--abc.com/", "http://a.com/a b", "http://a.com",
                "http://a.com/%7e", "http://u@a.com/", "http://a.com/#f", "http://a.com/\\x",
                "https://a.com:443/", "http://a.com:080/", "http://a.com:65536/",
                "http://a.com:0/", "http://a.com:/"]:
        assert not is_plain_absolute(url), url
    assert canonicalize("http://a.com:8080/x").port == 8080


def _canonical_or_error(url: str, base: str | None) -> str:
    try:
        return canonicalize(url, base=base).url
    except InvalidURL:
        return "invalid"


@settings(max_examples=2000, deadline=None)
@given(near_plain_urls(), st.sampled_from(["", "#", "#s1", "#a b", "#x#y", "#/../"]))
def test_fast_path_answers_like_ada_with_and_without_fragments(url: str, fragment: str) -> None:
    # an absolute URL joined to a base goes through ada's parser: the reference answer
    raw = url + fragment
    assert _canonical_or_error(raw, None) == _canonical_or_error(raw, "http://base.test/d/")
