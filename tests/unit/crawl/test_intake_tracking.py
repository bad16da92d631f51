"""The intake removes tracking parameters from every URL it takes in: links, seeds and
redirect targets (``make``) alike, so ``?utm_source`` variants are one URL."""

from __future__ import annotations

from courtier.core.config import CrawlConfig
from courtier.core.urls import canonicalize
from courtier.crawl.intake import Intake, Scope

NOW = 1000.0


def test_links_seeds_and_redirect_targets_lose_tracking_parameters() -> None:
    intake = Intake(Scope(CrawlConfig(scope="any", keep_params=("a.test:gclid",)), []))
    rows = intake.links([
        "http://a.test/p", "http://a.test/p?utm_source=x", "http://a.test/p?fbclid=1",
        "http://a.test/p?id=1&utm_medium=m", "http://a.test/p?gclid=7",
        "http://b.test/p?gclid=7",
    ], 1, NOW)
    assert [r.url for r in rows] == ["http://a.test/p", "http://a.test/p?id=1",
                                     "http://a.test/p?gclid=7", "http://b.test/p"]
    assert rows[0].url_key == canonicalize("http://a.test/p").url_key
    seeds, problems = intake.seed_urls([(1, "http://c.test/?utm_campaign=launch")], "x", NOW)
    assert not problems and [s.url for s in seeds] == ["http://c.test/"]
    target = intake.make(canonicalize("http://d.test/x?mc_cid=1&y=2"), 0, NOW)
    assert target is not None and target.url == "http://d.test/x?y=2"
    assert intake.tracking.removed == 6
