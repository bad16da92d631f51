"""A page of a type not asked for: the commit of outcome ``not_html`` (nothing archived,
due again after the longest recrawl interval) and the types a page fetch reads."""

from __future__ import annotations

import pytest

from courtier.core.config import CrawlConfig, build_config
from courtier.core.errors import ConfigError
from courtier.core.outcome import FINAL_OUTCOMES, Outcome
from courtier.crawl.fetcher import page_types
from tests.unit.crawl.test_process_hostile import NOW, make_processor, page_lease, response

DAY = 86400.0


def test_not_html_commits_without_archiving_and_comes_back_after_the_longest_interval() -> None:
    processor = make_processor()
    archive = processor.archive
    resp = response(200, b"", [("Content-Type", "application/pdf")], truncated="type")
    commit = processor.not_html(page_lease(), resp, NOW)
    assert commit.outcome is Outcome.NOT_HTML and Outcome.NOT_HTML in FINAL_OUTCOMES
    assert (commit.status, commit.content_type) == (200, "application/pdf")
    assert commit.warc_file is None and commit.payload_digest is None
    assert archive.records == 0  # type: ignore[attr-defined]
    assert commit.next_fetch_at == NOW + processor.policy.max_interval >= NOW + 30 * DAY
    assert commit.new_urls == ()
    assert commit.event["outcome"] == "not_html"
    assert commit.event["content_type"] == "application/pdf"


def test_page_types_are_html_and_accept_type() -> None:
    assert page_types(CrawlConfig()) == {"text/html", "application/xhtml+xml"}
    wider = build_config({"accept_types": ("Application/PDF", "image/*")}, environ={})
    assert page_types(wider) == {"text/html", "application/xhtml+xml", "application/pdf",
                                 "image/*"}


@pytest.mark.parametrize("bad", ["pdf", "application/", "*/*", "text/html;q=1", "a b/c"])
def test_a_bad_accept_type_names_the_flag(bad: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_config({"accept_types": (bad,)}, environ={})
    assert str(info.value).startswith(f"--accept-type {bad!r} is not a media type")
