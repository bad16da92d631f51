"""The shared link canonicalization memo (``urls.canonicalize_link``, used by the intake
and the event feed): the same rows and values as without it, and bounded."""

from __future__ import annotations

import pytest

from courtier import urls
from courtier.config import build_config
from courtier.errors import InvalidURL
from courtier.events.feed import link_entries
from courtier.intake import Intake, Scope
from courtier.parse.html import Link
from courtier.urls import canonicalize, canonicalize_link

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
    monkeypatch.setattr(urls, "LINK_MEMO_LIMIT", 10)
    intake = make_intake()
    rows = intake.links([f"http://a.test/p{i}" for i in range(35)], 1, 0.0)
    assert len(rows) == 35
    assert 0 < len(urls._LINK_MEMO) <= 10


@pytest.mark.parametrize("raw", [*LINKS[:3], "https://x.test:443/a/../b?%7e=1#f",
                                 "http://a.test/%c3%a9"])
def test_memo_gives_what_canonicalize_gives(raw: str) -> None:
    assert canonicalize_link(raw) == canonicalize(raw)
    assert canonicalize_link(raw) == canonicalize(raw)  # the remembered value, the same


def test_failures_raise_every_time_and_are_not_remembered() -> None:
    for _ in range(2):
        with pytest.raises(InvalidURL):
            canonicalize_link("mailto:someone@a.test")
    assert "mailto:someone@a.test" not in urls._LINK_MEMO


def test_event_links_are_the_same_through_the_memo() -> None:
    links = [Link("http://a.test/x#1", "a", "", False, "one"),
             Link("HTTP://A.TEST/x", "a", "nofollow", True, ""),
             Link("ftp://a.test/", "a", "", False, "bad")]
    urls._LINK_MEMO.clear()
    cold = link_entries(links)
    warm = link_entries(links)
    assert cold == warm == [{"url": "http://a.test/x", "anchor": "one", "tag": "a", "rel": [],
                             "nofollow": False, "sponsored": False, "ugc": False}]
