"""The shared link canonicalization memo (``link_memo.canonicalize_link``, used by the intake
and the event feed): the same rows and values as without it, and bounded."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtier.core import urls
from courtier.core.config import build_config
from courtier.core.errors import InvalidURL
from courtier.core.urls import canonicalize
from courtier.crawl import link_memo
from courtier.crawl.intake import Intake, Scope
from courtier.crawl.link_memo import canonicalize_link
from courtier.events.feed import link_entries
from courtier.parse.html import Link

LINKS = ["http://a.test/x", "HTTP://A.TEST:80/./x#frag", "http://a.test/y?", "not a url",
         "http://b.test/out-of-scope", "http://a.test/z"]


def make_intake() -> Intake:
    config = build_config({"seeds": (), "scope": "seeds-hosts"})
    return Intake(Scope(config, [canonicalize("http://a.test/")]))


def test_second_page_with_the_same_links_gives_the_same_rows() -> None:
    intake = make_intake()
    first = intake.links(LINKS, 1, 0.0)
    assert [row.url for row in first] == ["http://a.test/x", "http://a.test/y",
                                          "http://a.test/z"]
    fresh = make_intake()
    fresh.links(LINKS, 1, 0.0)
    # nothing committed yet: the store decides, so the rows come again, memo or not
    assert intake.links(LINKS, 1, 1.0) == fresh.links(LINKS, 1, 1.0)
    assert intake.rejected == fresh.rejected == 4  # invalid and out of scope, twice


def test_memo_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(link_memo, "LINK_MEMO_LIMIT", 10)
    intake = make_intake()
    rows = intake.links([f"http://a.test/p{i}" for i in range(35)], 1, 0.0)
    assert len(rows) == 35
    assert 0 < len(link_memo._LINK_MEMO) <= 20  # two generations of at most 10


def test_a_recurring_link_survives_rotations_and_a_one_off_does_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(link_memo, "LINK_MEMO_LIMIT", 10)
    parsed: list[str] = []

    def counting(raw: str) -> urls.CanonicalUrl:
        parsed.append(raw)
        return canonicalize(raw)

    monkeypatch.setattr(link_memo, "canonicalize", counting)
    link_memo._LINK_MEMO.clear()
    canonicalize_link("http://a.test/once")
    for i in range(100):  # ten rotations, the navigation link seen every 5th link
        if i % 5 == 0:
            assert canonicalize_link("http://a.test/nav#top") == canonicalize("http://a.test/nav")
        canonicalize_link(f"http://a.test/p{i}")
    assert parsed.count("http://a.test/nav#top") == 1  # parsed once, found ever after
    assert "http://a.test/nav" in link_memo._LINK_MEMO
    assert "http://a.test/once" not in link_memo._LINK_MEMO
    assert len(link_memo._LINK_MEMO) <= 20


@pytest.mark.parametrize("raw", [*LINKS[:3], "https://x.test:443/a/../b?%7e=1#f",
                                 "http://a.test/%c3%a9"])
def test_memo_gives_what_canonicalize_gives(raw: str) -> None:
    assert canonicalize_link(raw) == canonicalize(raw)
    assert canonicalize_link(raw) == canonicalize(raw)  # the remembered value, the same


def test_failures_raise_every_time_and_are_not_remembered() -> None:
    for _ in range(2):
        with pytest.raises(InvalidURL):
            canonicalize_link("mailto:someone@a.test")
    assert "mailto:someone@a.test" not in link_memo._LINK_MEMO


def test_event_links_are_the_same_through_the_memo() -> None:
    links = [Link("http://a.test/x#1", "a", "", False, "one"),
             Link("HTTP://A.TEST/x", "a", "nofollow", True, ""),
             Link("ftp://a.test/", "a", "", False, "bad")]
    link_memo._LINK_MEMO.clear()
    cold = link_entries(links)
    warm = link_entries(links)
    assert cold == warm == [{"url": "http://a.test/x", "anchor": "one", "tag": "a", "rel": [],
                             "nofollow": False, "sponsored": False, "ugc": False}]


@pytest.mark.parametrize("raw, key", [
    ("http://a.test/p#top", "http://a.test/p"),
    ("http://a.test/p?q=1#s3", "http://a.test/p?q=1"),
    ("http://u#x@a.test/", "http://u"),          # '#' ends the authority: host "u"
    ("http://a.test/p #top", "http://a.test/p #top"),   # space before '#': kept whole
    ("http://a.test/p\t#top", "http://a.test/p\t#top"),
    ("#top", "#top"),
    ("http://a.test/p", "http://a.test/p"),
])
def test_memo_key_drops_only_a_fragment_that_cannot_matter(raw: str, key: str) -> None:
    assert link_memo.link_memo_key(raw) == key


def test_a_long_fragment_is_not_cut() -> None:
    raw = "http://a.test/p#" + "f" * urls.MAX_URL_LENGTH
    assert link_memo.link_memo_key(raw) == raw
    link_memo._LINK_MEMO.clear()
    canonicalize_link("http://a.test/p#short")
    with pytest.raises(InvalidURL):  # too long as a whole, memo or not
        canonicalize_link(raw)


@pytest.mark.parametrize("first, second", [
    ("http://a.test/p#one", "http://a.test/p#two"),
    ("http://a.test/p", "http://a.test/p#two"),
    ("http://a.test/p#one", "http://a.test/p"),
    ("http://a.test/p #one", "http://a.test/p#one"),
    ("http://a.test/p#one", "http://a.test/p #one"),
    ("http://u#x@a.test/", "http://u#y@b.test/"),
    ("HTTP://A.TEST:80/./x#1", "http://a.test/x#2"),
])
def test_links_sharing_a_key_get_what_canonicalize_gives(first: str, second: str) -> None:
    link_memo._LINK_MEMO.clear()
    assert canonicalize_link(first) == canonicalize(first)
    assert canonicalize_link(second) == canonicalize(second)


@settings(max_examples=300, deadline=None)
@given(prefix=st.sampled_from(["http://a.test/p", "https://a.test:8443/x?y=1", "http://u",
                               "http://a.test/p ", "http://a.test/%7e", " http://a.test/"]),
       fragments=st.lists(st.text(max_size=12), min_size=1, max_size=4))
def test_any_fragments_of_one_link_match_canonicalize(prefix: str, fragments: list[str]) -> None:
    link_memo._LINK_MEMO.clear()
    for fragment in fragments:
        raw = prefix + "#" + fragment
        try:
            expected = canonicalize(raw)
        except InvalidURL:
            with pytest.raises(InvalidURL):
                canonicalize_link(raw)
            continue
        assert canonicalize_link(raw) == expected
