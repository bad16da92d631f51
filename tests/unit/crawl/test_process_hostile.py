"""The page pipeline against hostile content (issue 5): bad redirects, junk, deep markup.

:func:`make_processor` and :func:`page_lease` are also used by
``tests/integration/fetch/test_hostile_servers.py``.
"""

from __future__ import annotations

import random

import pytest

from courtier.core.config import CrawlConfig
from courtier.core.outcome import Outcome
from courtier.core.urls import canonicalize
from courtier.crawl.intake import Intake, Scope
from courtier.crawl.process import PageProcessor
from courtier.fetch.transport import FetchResponse
from courtier.frontier.lease import Lease, LeaseKind
from courtier.parse.html import ParsedPage, parse_html
from courtier.sim.archive import DigestOnlyArchive
from courtier.store.base import DueUrl

NOW = 1000.0
PAGE_URL = "http://site.test/a/page"


def make_processor() -> PageProcessor:
    """A processor that admits any http(s) URL and archives nothing."""
    config = CrawlConfig(scope="any")
    return PageProcessor(config, Intake(Scope(config, [])), DigestOnlyArchive(), "courtier")


def page_lease(url: str = PAGE_URL, redirect_hops: int = 0) -> Lease:
    canon = canonicalize(url)
    due = DueUrl(
        url_key=canon.url_key, url=canon.url, host_key=canon.host_key, shard=canon.shard,
        depth=0, priority=0, version=1, next_fetch_at=NOW, redirect_hops=redirect_hops,
    )  # fmt: skip
    return Lease(
        kind=LeaseKind.PAGE, host_key=canon.host_key, url=canon.url, issued_at=NOW,
        epoch=1, delay=0.0, due=due,
    )  # fmt: skip


def response(
    status: int = 200,
    body: bytes = b"",
    headers: list[tuple[str, str]] | None = None,
    truncated: str | None = None,
    url: str = PAGE_URL,
) -> FetchResponse:
    return FetchResponse(
        url=url, status=status, reason="", http_version="1.1",
        headers=headers if headers is not None else [("Content-Type", "text/html")],
        raw_body=body, body=body, truncated=truncated,
    )  # fmt: skip


# ------------------------------------------------------- redirects


@pytest.mark.parametrize(
    "location",
    [
        "file:///etc/passwd",
        "data:text/html,hi",
        "ftp://x/",
        "javascript:alert(1)",
        "  javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "mailto:a@b.test",
        "http://",
        "http://[::1",
    ],
)
def test_redirect_to_a_non_http_target_makes_no_new_url(location: str) -> None:
    commit = make_processor().fetched(
        page_lease(), response(301, headers=[("Location", location)]), NOW
    )
    assert commit.outcome is Outcome.REDIRECT
    assert list(commit.new_urls) == []
    assert commit.redirect_to is None


def test_redirect_to_an_http_target_makes_a_new_url() -> None:
    """Control for the test above."""
    commit = make_processor().fetched(
        page_lease(), response(302, headers=[("Location", "../other?x=1")]), NOW
    )
    assert commit.outcome is Outcome.REDIRECT
    assert [new.url for new in commit.new_urls] == ["http://site.test/other?x=1"]
    assert commit.redirect_to == "http://site.test/other?x=1"
    assert commit.new_urls[0].redirect_hops == 1


def test_redirect_past_max_hops_makes_no_new_url() -> None:
    processor = make_processor()
    hops = processor.config.max_redirect_hops
    commit = processor.fetched(
        page_lease(redirect_hops=hops),
        response(301, headers=[("Location", "http://site.test/next")]),
        NOW,
    )
    assert commit.redirect_to == "http://site.test/next"
    assert list(commit.new_urls) == []


def test_redirect_without_location_makes_no_new_url() -> None:
    commit = make_processor().fetched(page_lease(), response(301, headers=[]), NOW)
    assert commit.outcome is Outcome.REDIRECT
    assert list(commit.new_urls) == []


# ------------------------------------------------------- truncated and junk bodies


LINKED = b"<title>t</title>" + b"".join(b'<a href="/p%d">x</a>' % i for i in range(20))


@pytest.mark.parametrize(("truncated", "outcome"), [
    ("length", Outcome.OK), ("decoded", Outcome.OK), ("encoding", Outcome.OK),
    ("time", Outcome.RETRY), ("slow", Outcome.RETRY), ("disconnect", Outcome.RETRY)])
def test_truncated_html_is_not_parsed(truncated: str, outcome: Outcome) -> None:
    # issue 14: a cut body is never an ordinary 200 ok: the outcome detail says why, and
    # a slow or broken transfer is fetched again
    commit = make_processor().fetched(page_lease(), response(body=LINKED, truncated=truncated), NOW)
    assert commit.outcome is outcome
    assert commit.error_kind == f"truncated_{truncated}"
    assert commit.event["truncated"] == truncated
    assert list(commit.new_urls) == []
    assert commit.title is None


def test_complete_html_is_parsed() -> None:
    """Control for the test above."""
    commit = make_processor().fetched(page_lease(), response(body=LINKED), NOW)
    assert commit.error_kind is None and commit.event["truncated"] is None
    assert len(commit.new_urls) == 20
    assert commit.title == "t"


@pytest.mark.parametrize("seed", [0, 5, 42])
def test_random_binary_as_html_parses_without_exception(seed: int) -> None:
    junk = random.Random(seed).randbytes(1 << 20)
    for content_type in ("text/html", "text/html; charset=utf-16", "text/html; charset=bogus"):
        page = parse_html(junk, PAGE_URL, content_type)
        assert isinstance(page, ParsedPage)
        assert all(link.url.startswith(("http://", "https://")) for link in page.links)
    commit = make_processor().fetched(page_lease(), response(body=junk), NOW)
    assert commit.outcome is Outcome.OK


def test_truncated_sitemap_is_not_parsed() -> None:
    body = b'<?xml version="1.0"?><urlset><url><loc>http://site.test/x</loc></url></urlset>'
    headers = [("Content-Type", "application/xml")]
    url = "http://site.test/sitemap.xml"
    whole = make_processor().fetched(page_lease(url), response(body=body, headers=headers), NOW)
    assert [new.url for new in whole.new_urls] == ["http://site.test/x"]
    cut = make_processor().fetched(
        page_lease(url), response(body=body, headers=headers, truncated="length"), NOW
    )
    assert list(cut.new_urls) == []


# ------------------------------------------------------- pathological markup


@pytest.mark.parametrize(
    "markup",
    [
        b'<div class="n1">' * 10_000 + b'<a href="/deep">deep</a>',
        b"<span>" * 400_000,
        b"<b><i>" * 100_000 + b"<p>x",
        b"<table><tr><td>" * 50_000,
        b"<a href=/x>" * 100_000,
        b"<select><option>" * 100_000,
        b"<!--" + b"-" * 2_000_000,
        b"<a href='" + b"x" * 2_000_000,
    ],
    ids=["nested-div-10k", "span-400k", "formatting", "tables", "anchors", "options",
         "open-comment", "open-attribute"],
)  # fmt: skip
def test_pathological_markup_parses(markup: bytes) -> None:
    page = parse_html(markup, PAGE_URL, "text/html")
    assert isinstance(page, ParsedPage)
    assert len(page.links) <= 1




# ------------------------------------------------------- strings from pages are capped


def test_strings_from_a_page_are_capped_before_they_are_stored_or_emitted() -> None:
    # issue 14: a 1 MB <title> was stored whole and emitted as a 1 MB event
    from courtier.parse.caps import MAX_HEADER_CHARS, MAX_TITLE_CHARS

    body = (b"<title>" + b"word " * 200_000 + b"</title><link rel=canonical href='/"
            + b"c" * 5000 + b"'><a href=/x>x</a>")
    headers = [("Content-Type", "text/html; x=" + "y" * 100_000),
               ("ETag", '"' + "e" * 10_000 + '"'), ("Last-Modified", "z" * 10_000)]
    commit = make_processor().fetched(page_lease(), response(body=body, headers=headers), NOW)
    assert commit.title is not None and commit.title.startswith("word word")
    assert len(commit.title) <= MAX_TITLE_CHARS and commit.event["title"] == commit.title
    assert commit.content_type is not None and len(commit.content_type) == MAX_HEADER_CHARS
    assert commit.event["content_type"] == commit.content_type
    assert commit.etag is None and commit.last_modified is None  # cut, they would never match
    assert len(commit.new_urls) == 1  # the page is still read
    page = parse_html(body, PAGE_URL)
    assert page.canonical is None  # a 5000-character canonical is not reported
