"""Intake's canonicalization memo: the same rows as without it, and bounded."""

from __future__ import annotations

from courtier.config import build_config
from courtier.intake import Intake, Scope
from courtier.urls import canonicalize

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


def test_memo_stays_bounded() -> None:
    intake = make_intake()
    intake.canonical_memo = 10
    rows = intake.links([f"http://a.test/p{i}" for i in range(35)], 1, 0.0)
    assert len(rows) == 35
    assert len(intake._canonical) <= 10
