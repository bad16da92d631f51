"""Event payloads of the indexer feed, checked against the published schema."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import jsonschema
import pytest

from courtier.events import load_schema
from courtier.events.feed import header_charset, link_entries, media_type
from courtier.parse.html import Link
from courtier.store.base import FetchCommit
from tests.unit.crawl.test_process_hostile import NOW, make_processor, page_lease, response

VALIDATOR = jsonschema.Draft202012Validator(load_schema())

PAGE = (
    b'<html lang="en-GB"><head><title> A  page </title>'
    b'<meta name=robots content="noarchive">'
    b'<link rel=canonical href="/canonical"></head><body>'
    b'<a href="/x#one" rel="sponsored">Buy</a><a href="/x">again</a>'
    b'<a href="http://other.test/" rel="ugc nofollow">comment</a></body></html>'
)


def stored(commit: FetchCommit) -> dict[str, Any]:
    """The payload as the store writes it (with url_key, url, version, outcome)."""
    payload: dict[str, Any] = json.loads(commit.event_json())
    return payload


def test_an_ok_html_event_carries_everything_an_indexer_needs() -> None:
    headers = [("Content-Type", "text/html; charset=UTF-8"), ("Content-Language", "en"),
               ("X-Robots-Tag", "noimageindex")]
    event = stored(make_processor().fetched(page_lease(), response(200, PAGE, headers), NOW))
    VALIDATOR.validate(event)
    assert event["outcome"] == "ok" and event["kind"] == "fetch"
    assert event["final_url"] == event["url"] == "http://site.test/a/page"
    assert (event["mime"], event["charset"]) == ("text/html", "utf-8")
    assert (event["lang"], event["content_language"]) == ("en-GB", "en")
    assert event["title"] == "A page"
    assert event["canonical"] == "http://site.test/canonical"
    assert event["robots"] == {"noindex": False, "nofollow": False, "meta": "noarchive",
                               "header": "noimageindex"}
    assert event["links"] == [
        {"url": "http://site.test/x", "anchor": "Buy", "tag": "a", "rel": ["sponsored"],
         "nofollow": False, "sponsored": True, "ugc": False},
        {"url": "http://other.test/", "anchor": "comment", "tag": "a",
         "rel": ["ugc", "nofollow"], "nofollow": True, "sponsored": False, "ugc": True},
    ]
    assert len(event["simhash"]) == 16 and event["payload_digest"].startswith("sha256:")
    assert event["warc"]["file"] and event["unchanged"] is False and event["gone"] is False


def test_a_nofollow_page_reports_no_links_and_non_html_reports_null() -> None:
    body = b"<meta name=robots content=nofollow><a href=/x>x</a>"
    event = stored(make_processor().fetched(page_lease(), response(200, body), NOW))
    VALIDATOR.validate(event)
    assert event["links"] == [] and event["robots"]["nofollow"] is True
    pdf = response(200, b"%PDF-1.4", [("Content-Type", "application/pdf")])
    event = stored(make_processor().fetched(page_lease(), pdf, NOW))
    VALIDATOR.validate(event)
    assert event["links"] is None and event["robots"] is None and event["title"] is None


def test_not_modified_same_digest_and_gone_events_say_so() -> None:
    processor = make_processor()
    not_modified = stored(processor.fetched(page_lease(), response(304), NOW))
    VALIDATOR.validate(not_modified)
    assert not_modified["unchanged"] is True and not_modified["warc"]["revisit"] is True
    first = processor.fetched(page_lease(), response(200, PAGE), NOW)
    lease = page_lease()
    assert lease.due is not None
    again = dataclasses.replace(lease, due=dataclasses.replace(
        lease.due, payload_digest=first.payload_digest))
    same = stored(processor.fetched(again, response(200, PAGE), NOW + 60))
    VALIDATOR.validate(same)
    assert (same["changed"], same["unchanged"]) == (False, True)
    gone = stored(processor.fetched(page_lease(), response(410, b"gone"), NOW))
    VALIDATOR.validate(gone)
    assert gone["gone"] is True and gone["outcome"] == "gone"


def test_redirect_and_denied_events_validate() -> None:
    processor = make_processor()
    moved = stored(processor.fetched(page_lease(redirect_hops=2),
                                     response(301, headers=[("Location", "/b")]), NOW))
    VALIDATOR.validate(moved)
    assert moved["redirect_to"] == "http://site.test/b" and moved["redirect_hops"] == 2
    lease = page_lease()
    assert lease.due is not None
    denied = stored(processor.denied(lease.due, "robots", None, 1, NOW))
    VALIDATOR.validate(denied)
    assert denied["status"] is None and denied["warc"] is None


def test_each_hop_hands_its_chain_on_and_the_page_event_carries_it() -> None:
    """A → 301 → B → 302 → C → 200: C's event names both hops with their statuses."""
    processor = make_processor()
    lease, statuses = page_lease("http://site.test/a"), [301, 302]
    for status, target in zip(statuses, ["/b", "/c"], strict=True):
        commit = processor.fetched(lease, response(status, headers=[("Location", target)]), NOW)
        VALIDATOR.validate(stored(commit))
        (new,) = commit.new_urls
        assert lease.due is not None
        lease = dataclasses.replace(lease, url=new.url, due=dataclasses.replace(
            lease.due, url=new.url, url_key=new.url_key, redirect_hops=new.redirect_hops,
            redirect_chain=new.redirect_chain))
    page = stored(processor.fetched(lease, response(200, PAGE, [("Content-Type", "text/html")]),
                                    NOW))
    VALIDATOR.validate(page)
    assert page["final_url"] == "http://site.test/c" and page["redirect_hops"] == 2
    assert page["redirect_chain"] == [{"url": "http://site.test/a", "status": 301},
                                      {"url": "http://site.test/b", "status": 302}]
    assert page["redirect_chain_dropped"] == 0
    direct = stored(processor.fetched(page_lease(), response(200, PAGE), NOW))
    assert (direct["redirect_chain"], direct["redirect_chain_dropped"]) == ([], 0)


def test_a_long_chain_keeps_its_first_hop_and_the_latest_ones() -> None:
    from courtier.events.redirects import MAX_CHAIN, chain_hops, extend_chain

    chain = None
    for n in range(MAX_CHAIN + 5):
        chain = extend_chain(chain, f"http://site.test/{n}", 301)
    hops = chain_hops(chain)
    assert len(hops) == MAX_CHAIN
    assert hops[0]["url"] == "http://site.test/0"
    assert [h["url"] for h in hops[1:]] == [f"http://site.test/{n}"
                                             for n in range(6, MAX_CHAIN + 5)]
    assert chain_hops("not json") == [] and chain_hops('{"a": 1}') == []


def test_the_schema_rejects_what_it_should() -> None:
    event = stored(make_processor().fetched(page_lease(), response(200, PAGE), NOW))
    for broken in ({"links": [{"url": "http://x.test/#frag"}]}, {"simhash": 12},
                   {"kind": "other"}, {"unchanged": None}):
        with pytest.raises(jsonschema.ValidationError):
            VALIDATOR.validate(event | broken)
    without = dict(event)
    del without["canonical"]
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate(without)


def test_link_entries_fold_by_canonical_url() -> None:
    links = [Link("http://A.test/p#x", "a", "nofollow", True, ""),
             Link("http://a.test/p", "a", "", False, "text")]
    assert link_entries(links) == [{"url": "http://a.test/p", "anchor": "text", "tag": "a",
                                    "rel": ["nofollow"], "nofollow": False,
                                    "sponsored": False, "ugc": False}]


def test_media_type_and_charset_of_a_header() -> None:
    assert media_type(" Text/HTML ; charset=x") == "text/html"
    assert header_charset('text/html; Charset="ISO-8859-1"') == "iso-8859-1"
    assert media_type(None) is None and header_charset("text/html") is None
