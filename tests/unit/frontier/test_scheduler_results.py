"""Leases coming back to the frontier: fetch results, leases given back or deferred,
URLs whose fetch was not kept; the slots they free and the hosts they wake."""

from __future__ import annotations

from courtier.core.clock import VirtualClock
from courtier.frontier import FetchFeedback, Frontier, Lease, LeaseKind
from tests.unit.frontier.test_scheduler import add, due, make

A, B = "http://a.test", "http://b.test"


def robots_lease(frontier: Frontier) -> Lease:
    lease = frontier.next_lease()
    assert lease is not None and lease.kind is LeaseKind.ROBOTS
    return lease


def page_lease(clock: VirtualClock, frontier: Frontier) -> Lease:
    """The robots.txt lease answered 404, then the first page lease once it may start."""
    frontier.finish_robots(robots_lease(frontier), 404)
    wake = frontier.next_wake_at()
    assert wake is not None
    clock.set(wake)
    lease = frontier.next_lease()
    assert lease is not None and lease.kind is LeaseKind.PAGE
    return lease


def test_a_returned_page_lease_releases_its_url_and_frees_the_slot() -> None:
    clock, frontier = make(delay=0.0)
    add(frontier, due(A + "/1"), due(A + "/2"))
    lease = page_lease(clock, frontier)
    assert frontier.next_lease() is None  # one in flight per host
    frontier.return_lease(lease)
    assert lease.due is not None
    assert frontier.take_released() == [(lease.due, lease.due.next_fetch_at)]
    assert frontier.in_flight == 0 and frontier.queued == 1
    other = frontier.next_lease()
    assert other is not None and other.url != lease.url


def test_a_returned_robots_lease_is_issued_again() -> None:
    _, frontier = make(delay=0.0)
    add(frontier, due(A + "/1"))
    frontier.return_lease(robots_lease(frontier))
    assert frontier.take_released() == []
    robots_lease(frontier)  # issued again


def test_a_deferred_lease_goes_back_to_the_queue_and_holds_host_and_address() -> None:
    clock, frontier = make(delay=0.0)
    for key in (A, B):
        frontier.register_host(key, due(key + "/").shard, ip="10.0.0.1")
    add(frontier, due(A + "/1"), due(B + "/1"))
    for _ in range(2):
        frontier.finish_robots(robots_lease(frontier), 404)
    lease = frontier.next_lease()
    assert lease is not None and lease.kind is LeaseKind.PAGE
    until = clock.now() + 50.0
    frontier.defer_lease(lease, until)
    assert frontier.queued == 2 and frontier.take_released() == []
    assert frontier.next_lease() is None  # neither host of the address before ``until``
    assert frontier.next_wake_at() == until
    clock.set(until)
    urls = {lease.url for lease in (frontier.next_lease(), frontier.next_lease()) if lease}
    assert urls == {A + "/1", B + "/1"}


def test_a_deferred_lease_of_a_host_without_a_known_address_holds_the_host() -> None:
    clock, frontier = make(delay=0.0)
    add(frontier, due(A + "/1"))
    lease = page_lease(clock, frontier)
    frontier.defer_lease(lease, clock.now() + 30.0)
    assert frontier.next_lease() is None
    clock.advance(30.0)
    again = frontier.next_lease()
    assert again is not None and again.url == lease.url


def test_a_url_whose_fetch_was_not_kept_is_released_for_the_time_given() -> None:
    _, frontier = make()
    item = due(A + "/1")
    frontier.release_url(item, 5000.0)
    frontier.release_url(None, 6000.0)
    assert frontier.take_released() == [(item, 5000.0)]


def test_with_one_fetch_at_a_time_the_delay_runs_from_the_end_of_the_fetch() -> None:
    clock, frontier = make(delay=2.0)
    add(frontier, due(A + "/1"), due(A + "/2"))
    first = page_lease(clock, frontier)
    clock.advance(5.0)  # a slow response
    frontier.finish_page(first, FetchFeedback(200, 5.0))
    assert frontier.next_wake_at() == clock.now() + 2.0


def test_a_failed_fetch_backs_the_host_off() -> None:
    clock, frontier = make(delay=1.0)
    add(frontier, due(A + "/1"), due(A + "/2"))
    first = page_lease(clock, frontier)
    frontier.finish_page(first, FetchFeedback(503, 0.1))
    host = frontier.hosts[A]
    assert host.timing.backoff_until > clock.now() + 1.0
    assert host.timing.throttle_delay > 1.0  # "overloaded": the rate is lowered too
    wake = frontier.next_wake_at()
    assert wake is not None and wake >= host.timing.backoff_until


def test_a_freed_address_slot_wakes_the_hosts_that_waited_for_it() -> None:
    _, frontier = make(delay=0.0, max_in_flight_per_ip=1)
    for key in (A, B):
        frontier.register_host(key, due(key + "/").shard, ip="10.0.0.1")
    add(frontier, due(A + "/1"), due(B + "/1"))
    first = robots_lease(frontier)
    assert frontier.next_lease() is None  # the address's one slot is taken
    frontier.finish_robots(first, 404)
    second = frontier.next_lease()
    assert second is not None and second.host_key != first.host_key


def test_a_robots_redirect_spends_and_frees_the_target_hosts_slot() -> None:
    clock, frontier = make(delay=1.0)
    add(frontier, due(A + "/1"))
    frontier.finish_robots(robots_lease(frontier), 301, location=B + "/robots.txt")
    clock.advance(1.0)
    redirected = frontier.next_lease()
    assert redirected is not None and redirected.url == B + "/robots.txt"
    assert redirected.also_host == B and frontier.hosts[B].in_flight == 1
    clock.advance(0.5)
    frontier.finish_robots(redirected, 200, b"User-agent: *\nAllow: /\n")
    assert frontier.hosts[B].in_flight == 0
    assert frontier.hosts[B].next_allowed_at == clock.now() + 1.0
