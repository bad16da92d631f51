"""http hosts that move to https (issue 31): the rule that notices them, the frontier
settling their URLs without a request, and the commit each of those URLs gets."""

from __future__ import annotations

import json

import pytest

from courtier.core.outcome import Outcome
from courtier.core.records import HostRecord
from courtier.crawl.https_upgrade import (
    UPGRADE_HOP_STATUS,
    UPGRADE_KIND,
    https_twin,
    upgrade_target,
)
from courtier.frontier import LeaseKind
from tests.unit.crawl.test_process_hostile import make_processor, page_lease
from tests.unit.frontier.test_scheduler import add, due, make, run


@pytest.mark.parametrize(("url", "status", "location", "target"), [
    ("http://a.test/p?q=1", 301, "https://a.test/p?q=1", "https://a.test"),
    ("http://a.test/p", 308, "https://A.TEST:443/p", "https://a.test"),
    ("http://a.test/robots.txt", 301, "https://a.test/robots.txt", "https://a.test"),
    ("http://a.test:8080/p", 301, "https://a.test:8443/p", "https://a.test:8443"),
    ("http://a.test/p", 302, "https://a.test/p", None),       # not permanent
    ("http://a.test/p", 307, "https://a.test/p", None),
    ("http://a.test/p", 200, "https://a.test/p", None),
    ("http://a.test/p", 301, "https://a.test/", None),        # elsewhere on the host
    ("http://a.test/p", 301, "https://a.test/p?x=1", None),   # another query
    ("http://a.test/p", 301, "https://www.a.test/p", None),   # another host name
    ("http://a.test/p", 301, "http://a.test:8080/p", None),   # still http
    ("http://a.test/p", 301, "/p", None),                     # relative: same scheme
    ("http://a.test/p", 301, None, None),
    ("http://a.test/p", 301, "https://[bad", None),
    ("https://a.test/p", 301, "https://a.test/p", None),      # not an http host
])
def test_only_a_permanent_redirect_to_the_same_url_on_https_teaches_it(
        url: str, status: int, location: str | None, target: str | None) -> None:
    host_key = url[:url.index("/", 8)]
    assert upgrade_target(url, host_key, status, location) == target


def test_a_url_of_another_host_teaches_nothing_about_this_one() -> None:
    """A robots.txt lease may fetch another host's file (a cross-host robots redirect)."""
    assert upgrade_target("http://b.test/robots.txt", "http://a.test", 301,
                          "https://b.test/robots.txt") is None


def test_the_twin_keeps_path_and_query() -> None:
    assert https_twin("http://a.test/p/1.html?x=1", "http://a.test", "https://a.test") \
        == "https://a.test/p/1.html?x=1"
    assert https_twin("http://a.test:8080/", "http://a.test:8080", "https://a.test:8443") \
        == "https://a.test:8443/"


def test_an_upgraded_host_has_its_urls_denied_without_any_lease() -> None:
    """Queued URLs and those that come later are denied with the https host key; no
    lease, robots.txt included, is issued for the host. Seen red with the upgrade left
    out of the frontier's deny check (a robots.txt lease was issued)."""
    clock, frontier = make()
    add(frontier, due("http://a.test/1"), due("http://a.test/2"), due("http://b.test/1"))
    frontier.upgrade_to_https("http://a.test", "https://a.test")
    add(frontier, due("http://a.test/3"))
    leases = run(clock, frontier, {})
    assert {lease.host_key for lease in leases} == {"http://b.test"}
    denied = frontier.take_denied()
    assert sorted(d.url for d, _, _ in denied) == [
        "http://a.test/1", "http://a.test/2", "http://a.test/3"]
    assert {(why, detail) for _, why, detail in denied} == {(UPGRADE_KIND, "https://a.test")}
    assert frontier.queued == 0


def test_the_stored_rule_comes_back_with_the_host() -> None:
    """A restart or a new shard owner registers the host from its stored record."""
    clock, frontier = make()
    frontier.register_host("http://a.test", 1, HostRecord("http://a.test", 1,
                                                          https_upgrade="https://a.test"))
    add(frontier, due("http://a.test/1"))
    assert run(clock, frontier, {}) == []
    assert [why for _, why, _ in frontier.take_denied()] == [UPGRADE_KIND]


def test_an_http_host_that_was_fetched_before_goes_on_to_be_fetched() -> None:
    clock, frontier = make()
    add(frontier, due("http://a.test/1"))
    leases = run(clock, frontier, {})
    assert [lease.kind for lease in leases] == [LeaseKind.ROBOTS, LeaseKind.PAGE]
    assert frontier.take_denied() == []


def test_a_settled_url_is_a_redirect_to_its_twin_with_no_status() -> None:
    """Outcome redirect, no status, error_kind https_upgrade, the twin as redirect_to and
    as a new row one hop further whose chain names the http URL with the internal
    redirect's status; the event says the same."""
    lease = page_lease("http://a.test/p/1.html?x=1", redirect_hops=1)
    assert lease.due is not None
    commit = make_processor().denied(lease.due, UPGRADE_KIND, "https://a.test", 1, 1000.0)
    assert (commit.outcome, commit.status, commit.error_kind) == (
        Outcome.REDIRECT, None, UPGRADE_KIND)
    assert commit.redirect_to == "https://a.test/p/1.html?x=1"
    (row,) = commit.new_urls
    assert (row.url, row.host_key, row.redirect_hops) == (
        "https://a.test/p/1.html?x=1", "https://a.test", 2)
    assert json.loads(row.redirect_chain or "[]") == [
        {"url": "http://a.test/p/1.html?x=1", "status": UPGRADE_HOP_STATUS}]
    event = commit.event
    assert (event["outcome"], event["status"], event["error_kind"], event["redirect_to"]) \
        == ("redirect", None, UPGRADE_KIND, "https://a.test/p/1.html?x=1")


def test_the_twin_is_not_taken_in_past_the_redirect_hop_limit() -> None:
    processor = make_processor()
    lease = page_lease("http://a.test/p", redirect_hops=processor.config.max_redirect_hops)
    assert lease.due is not None
    commit = processor.denied(lease.due, UPGRADE_KIND, "https://a.test", 1, 1000.0)
    assert commit.outcome is Outcome.REDIRECT and commit.new_urls == []
