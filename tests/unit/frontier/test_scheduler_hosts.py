"""The frontier's host registry: restored host state, saved page windows, policy
overrides and addresses the SSRF guard refuses."""

from __future__ import annotations

from courtier.core.records import DAY, HostRecord
from courtier.frontier import FetchFeedback, HostPolicy, LeaseKind
from tests.unit.frontier.test_scheduler import ROBOTS_OK, add, due, make, run

A = "http://a.test"


def record(**kw: object) -> HostRecord:
    return HostRecord(A, due(A + "/").shard, **kw)  # type: ignore[arg-type]


def test_a_restored_record_brings_back_the_robots_copy_and_the_back_off() -> None:
    clock, frontier = make(delay=1.0)
    frontier.register_host(A, due(A + "/").shard, record(
        robots_status=200, robots_body=ROBOTS_OK, robots_fetched_at=900.0,
        robots_expires_at=5000.0, backoff_until=1010.0))
    add(frontier, due(A + "/private/x"), due(A + "/ok"))
    assert frontier.next_lease() is None  # backing off
    assert frontier.next_wake_at() == 1010.0
    leases = run(clock, frontier, {})
    # the stored copy is in force: no robots.txt fetch, and its rules deny /private/
    assert [(lease.kind, lease.url, lease.issued_at) for lease in leases] == [
        (LeaseKind.PAGE, A + "/ok", 1010.0)]
    assert [(d.url, reason) for d, reason, _ in frontier.take_denied()] == [
        (A + "/private/x", "robots")]


def test_a_restored_copy_that_has_expired_is_fetched_again_first() -> None:
    _, frontier = make(delay=0.0)
    frontier.register_host(A, due(A + "/").shard, record(
        robots_status=200, robots_body=ROBOTS_OK, robots_fetched_at=100.0,
        robots_expires_at=999.0))
    add(frontier, due(A + "/ok"))
    lease = frontier.next_lease()
    assert lease is not None and lease.kind is LeaseKind.ROBOTS


def test_a_restored_host_waits_one_delay_of_its_policy_before_its_first_request() -> None:
    clock, frontier = make(delay=1.0)
    frontier.register_host(A, due(A + "/").shard, record(
        robots_status=404, robots_fetched_at=900.0, robots_expires_at=5000.0,
        policy_delay=30.0))
    add(frontier, due(A + "/1"))
    assert frontier.next_lease() is None
    clock.set(1029.0)
    assert frontier.next_lease() is None
    clock.set(1030.0)
    lease = frontier.next_lease()
    assert lease is not None and lease.kind is LeaseKind.PAGE and lease.delay == 30.0


def test_a_restored_blocked_policy_denies_the_hosts_urls() -> None:
    _, frontier = make()
    frontier.register_host(A, due(A + "/").shard, record(blocked=True))
    add(frontier, due(A + "/1"))
    assert frontier.next_lease() is None
    assert [reason for _, reason, _ in frontier.take_denied()] == ["blocked"]


def test_registering_a_known_host_again_keeps_its_state() -> None:
    _, frontier = make()
    add(frontier, due(A + "/1"))
    frontier.set_policy(A, HostPolicy(delay=10.0))
    frontier.register_host(A, due(A + "/").shard, record(blocked=True))
    assert frontier.hosts[A].policy == HostPolicy(delay=10.0)
    lease = frontier.next_lease()
    assert lease is not None and lease.kind is LeaseKind.ROBOTS


def test_a_policy_for_an_unknown_host_is_not_kept() -> None:
    _, frontier = make()
    frontier.set_policy(A, HostPolicy(blocked=True))
    add(frontier, due(A + "/1"))
    assert frontier.hosts[A].policy == HostPolicy()
    assert frontier.next_lease() is not None


def test_a_saved_page_window_holds_the_host_until_the_window_ends() -> None:
    clock, frontier = make(delay=1.0, release_horizon=10 * DAY)
    add(frontier, due(A + "/1"))
    frontier.set_policy(A, HostPolicy(max_pages=2))
    day_start = clock.now() - 3600.0
    frontier.restore_day_pages(A, day_start, 2)  # today's two pages were fetched already
    assert frontier.next_lease() is None
    assert frontier.next_wake_at() == day_start + DAY
    clock.set(day_start + DAY)
    assert frontier.next_lease() is not None


def test_a_saved_page_window_older_than_a_day_is_ignored() -> None:
    clock, frontier = make(delay=1.0, release_horizon=10 * DAY)
    add(frontier, due(A + "/1"))
    frontier.set_policy(A, HostPolicy(max_pages=2))
    frontier.restore_day_pages(A, clock.now() - DAY - 1.0, 2)
    assert frontier.hosts[A].day_start is None
    assert frontier.next_lease() is not None


# -- addresses the SSRF guard refuses -------------------------------------------------------


def test_a_host_whose_robots_fetch_hit_a_blocked_address_denies_its_urls_as_blocked() -> None:
    # the worker marks the address blocked, then ends the robots fetch as a network error
    _, frontier = make(delay=1.0)
    add(frontier, due("http://a.test/1"), due("http://a.test/2"))
    robots = frontier.next_lease()
    assert robots is not None and robots.kind is LeaseKind.ROBOTS
    frontier.block_address(robots.host_key)
    frontier.finish_robots(robots, None)
    denied = frontier.take_denied()
    assert sorted((d.url, reason) for d, reason, _ in denied) == [
        ("http://a.test/1", "blocked_address"), ("http://a.test/2", "blocked_address")]
    assert frontier.take_released() == []  # not handed back to be retried later
    assert frontier.queued == 0


def test_urls_added_to_an_address_blocked_host_are_denied_without_a_fetch() -> None:
    _, frontier = make(delay=1.0)
    add(frontier, due("http://a.test/1"))
    frontier.block_address("http://a.test")
    add(frontier, due("http://a.test/2"))
    assert frontier.next_lease() is None
    denied = frontier.take_denied()
    assert sorted(d.url for d, reason, _ in denied if reason == "blocked_address") == [
        "http://a.test/1", "http://a.test/2"]


def test_a_page_fetch_that_hit_a_blocked_address_denies_the_rest_of_the_host() -> None:
    clock, frontier = make(delay=1.0)
    add(frontier, *(due(f"http://a.test/{n}") for n in range(4)))
    robots = frontier.next_lease()
    assert robots is not None
    frontier.finish_robots(robots, 404)
    clock.advance(1.0)
    page = frontier.next_lease()
    assert page is not None and page.kind is LeaseKind.PAGE
    frontier.block_address(page.host_key)  # the worker's order: block, then finish
    frontier.finish_page(page, FetchFeedback(None, 0.0))
    assert len([1 for _, reason, _ in frontier.take_denied() if reason == "blocked_address"]) == 3
    assert frontier.take_released() == [] and frontier.queued == 0
