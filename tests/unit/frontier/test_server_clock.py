"""One politeness clock per server: every scheme and port of a host name shares the
delay, the in-flight cap, back-off and Retry-After; robots.txt and queues stay per host.

Seen red on a scratch copy: with ``Frontier.register_host`` giving each host key a clock
of its own (the code before this change), the http and https leases of
``test_http_and_https_of_one_name_keep_one_delay_between_them`` started 0.5 s apart
("gap 0.5 < 2.0"), ``test_one_request_at_a_time_to_the_server`` granted the https
robots.txt while the http one was in flight, and the Crawl-delay, back-off and stored
back-off tests failed the same way; with ``Frontier._reschedule_server`` not rescheduling
the siblings, the https host of
``test_a_sibling_waiting_for_the_slot_is_granted_when_it_frees`` was never granted
(``next_wake_at`` None: the crawl would have stalled).
"""

from __future__ import annotations

import itertools

from courtier.core.records import HostRecord
from courtier.core.urls import server_of
from courtier.frontier import FetchFeedback, LeaseKind
from tests.unit.frontier.test_scheduler import add, due, make, run

CRAWL_DELAY_3 = b"User-agent: *\nCrawl-delay: 3\n"
CRAWL_DELAY_1 = b"User-agent: *\nCrawl-delay: 1\n"


def _pages_by_start(leases: list) -> list:  # type: ignore[type-arg]
    return sorted((lease for lease in leases if lease.kind is LeaseKind.PAGE),
                  key=lambda lease: lease.issued_at)


def test_http_and_https_of_one_name_keep_one_delay_between_them() -> None:
    clock, frontier = make(delay=2.0)
    add(frontier, *(due(f"{scheme}://a.test/{i}") for i in range(3)
                    for scheme in ("http", "https")))
    leases = run(clock, frontier, {}, latency=0.5)
    assert {lease.host_key for lease in leases} == {"http://a.test", "https://a.test"}
    # robots.txt per scheme and authority (RFC 9309): one fetch each
    assert sorted(lease.url for lease in leases if lease.kind is LeaseKind.ROBOTS) == [
        "http://a.test/robots.txt", "https://a.test/robots.txt"]
    starts = sorted(lease.issued_at for lease in leases)
    # one request at a time, the next 2 s after the end of the previous (0.5 s long)
    for a, b in itertools.pairwise(starts):
        assert b - a >= 2.5 - 1e-9, f"gap {b - a} < 2.0 after a 0.5 s fetch"
    assert frontier.hosts["http://a.test"].server is frontier.hosts["https://a.test"].server


def test_ports_share_the_clock_and_other_names_do_not() -> None:
    clock, frontier = make(delay=2.0)
    add(frontier, due("https://a.test:8443/x"), due("https://a.test/x"),
        due("https://www.a.test/x"))
    servers = {key: host.server for key, host in frontier.hosts.items()}
    assert servers["https://a.test:8443"] is servers["https://a.test"]
    assert servers["https://www.a.test"] is not servers["https://a.test"]
    assert set(frontier.servers) == {"a.test", "www.a.test"}
    leases = run(clock, frontier, {})
    on_a = sorted(lease.issued_at for lease in leases if server_of(lease.host_key) == "a.test")
    assert len(on_a) == 4 and all(b - a >= 2.0 for a, b in itertools.pairwise(on_a))
    on_www = [lease.issued_at for lease in leases if lease.host_key == "https://www.a.test"]
    assert on_www[0] == 1000.0  # its own clock: not held back by a.test


def test_one_request_at_a_time_to_the_server() -> None:
    _clock, frontier = make(delay=0.0)
    add(frontier, due("http://a.test/1"), due("https://a.test/1"))
    first = frontier.next_lease()
    assert first is not None and first.kind is LeaseKind.ROBOTS
    assert frontier.next_lease() is None  # the other scheme's robots.txt waits too
    frontier.finish_robots(first, 404)
    second = frontier.next_lease()
    assert second is not None
    assert frontier.next_lease() is None  # one in flight to the server: nothing else


def test_a_sibling_waiting_for_the_slot_is_granted_when_it_frees() -> None:
    clock, frontier = make(delay=1.0)
    add(frontier, due("http://a.test/1"))
    robots = frontier.next_lease()
    assert robots is not None
    frontier.finish_robots(robots, 404)
    clock.advance(1.0)
    page = frontier.next_lease()
    assert page is not None and page.host_key == "http://a.test"
    add(frontier, due("https://a.test/1"))  # arrives while the http page is in flight
    assert frontier.next_lease() is None
    clock.advance(0.2)
    frontier.finish_page(page, FetchFeedback(200, 0.2))
    wake = frontier.next_wake_at()
    assert wake is not None and wake >= clock.now() + 1.0  # one delay after the end
    clock.set(wake)
    lease = frontier.next_lease()
    assert lease is not None and lease.host_key == "https://a.test"
    assert lease.kind is LeaseKind.ROBOTS  # its own robots.txt first


def test_the_largest_crawl_delay_of_the_server_governs_both_schemes() -> None:
    clock, frontier = make(delay=0.5)
    add(frontier, *(due(f"{scheme}://a.test/{i}") for i in range(4)
                    for scheme in ("http", "https")))
    robots = {"http://a.test": (200, CRAWL_DELAY_3), "https://a.test": (200, CRAWL_DELAY_1)}
    leases = run(clock, frontier, robots)
    pages = _pages_by_start(leases)
    assert {lease.host_key for lease in pages} == {"http://a.test", "https://a.test"}
    for a, b in itertools.pairwise(pages):
        assert b.issued_at - a.issued_at >= 3.0 - 1e-9
    assert all(lease.delay == 3.0 for lease in pages)
    http, https = frontier.hosts["http://a.test"], frontier.hosts["https://a.test"]
    assert frontier.delay_for(http) == frontier.delay_for(https) == 3.0


def test_a_forgotten_host_s_crawl_delay_counts_until_the_clock_goes_with_the_last() -> None:
    clock, frontier = make(delay=0.5)
    add(frontier, due("http://a.test/1"), due("https://a.test/1"))
    run(clock, frontier, {"http://a.test": (200, CRAWL_DELAY_3),
                          "https://a.test": (200, CRAWL_DELAY_1)})
    server = frontier.servers["a.test"]
    assert server.crawl_delay == 3.0
    clock.advance(10)
    frontier.forget_idle_hosts(keep=1)  # drops one of the two (both idle once due)
    assert len(frontier.hosts) == 1 and frontier.servers["a.test"] is server
    (left,) = frontier.hosts
    # the Crawl-delay of the host that left still counts (a shard handed over saves the
    # clock of hosts already forgotten, with the delay they had in force)
    assert server.members == [left] and server.crawl_delay == 3.0
    assert frontier.delay_for(frontier.hosts[left]) == 3.0
    frontier.forget_idle_hosts(keep=0)
    assert not frontier.servers


def test_a_back_off_on_one_scheme_pauses_the_other() -> None:
    clock, frontier = make(delay=0.0, release_horizon=600.0)
    add(frontier, due("https://a.test/1"), due("https://a.test/2"), due("http://a.test/1"))
    page = frontier.next_lease()
    while page is not None and page.kind is LeaseKind.ROBOTS:  # robots.txt first
        frontier.finish_robots(page, 404)
        clock.advance(0.1)
        page = frontier.next_lease()
    assert page is not None and page.kind is LeaseKind.PAGE
    assert page.host_key == "https://a.test"
    retry_at = clock.now() + 120.0
    frontier.finish_page(page, FetchFeedback(503, 0.1, retry_at=retry_at))
    assert frontier.next_lease() is None
    wake = frontier.next_wake_at()
    assert wake is not None and wake >= retry_at  # Retry-After holds every scheme
    clock.set(retry_at - 1.0)
    assert frontier.next_lease() is None
    clock.set(retry_at)
    after = frontier.next_lease()  # the http side's robots.txt or a page, not before
    assert after is not None and after.issued_at >= retry_at


def test_a_stored_back_off_of_one_host_is_not_shortened_by_a_sibling_s_record() -> None:
    _clock, frontier = make(delay=1.0)
    frontier.register_host("https://a.test", 5, HostRecord("https://a.test", 5,
                                                             backoff_until=5000.0))
    frontier.register_host("http://a.test", 5, HostRecord("http://a.test", 5,
                                                            backoff_until=1200.0))
    assert frontier.hosts["http://a.test"].timing.backoff_until == 5000.0
