"""The two-level frontier under a virtual clock: politeness, robots gating, ordering."""

from __future__ import annotations

import itertools

from courtier.core.clock import VirtualClock
from courtier.core.records import HostRecord
from courtier.core.urls import canonicalize
from courtier.frontier import FetchFeedback, Frontier, HostPolicy, Lease, LeaseKind
from courtier.frontier.ready import TURN_EVERY
from courtier.politeness.delays import DelayPolicy
from courtier.politeness.robots_state import RobotsPolicy
from courtier.store.base import DueUrl

ROBOTS_OK = b"User-agent: *\nDisallow: /private/\n"


def due(url: str, priority: int = 0, depth: int = 1) -> DueUrl:
    c = canonicalize(url)
    return DueUrl(c.url_key, c.url, c.host_key, c.shard, depth, priority, 0, 0.0)


def make(delay: float = 1.0, **kw: object) -> tuple[VirtualClock, Frontier]:
    clock = VirtualClock(1000.0)
    frontier = Frontier(clock, "courtier", DelayPolicy(delay=delay, adaptive_factor=0.0),
                        RobotsPolicy(expiry=kw.pop("expiry", 3600.0)),  # type: ignore[arg-type]
                        **kw)  # type: ignore[arg-type]
    return clock, frontier


def add(frontier: Frontier, *items: DueUrl) -> None:
    for item in items:
        if not frontier.knows_host(item.host_key):
            frontier.register_host(item.host_key, item.shard)
    frontier.add(items)


def run(clock: VirtualClock, frontier: Frontier, robots: dict[str, tuple[int, bytes]],
        latency: float = 0.0, limit: int = 500) -> list[Lease]:
    """Drive the frontier to quiescence, finishing each lease after ``latency``."""
    issued: list[Lease] = []
    for _ in range(limit):
        lease = frontier.next_lease()
        if lease is None:
            wake = frontier.next_wake_at()
            if wake is None:
                break
            clock.set(max(clock.now(), wake))
            continue
        issued.append(lease)
        clock.advance(latency)
        if lease.kind is LeaseKind.ROBOTS:
            status, body = robots.get(lease.host_key, (404, b""))
            frontier.finish_robots(lease, status, body)
        else:
            frontier.finish_page(lease, FetchFeedback(200, latency))
    return issued


def test_robots_is_fetched_first_and_counts_against_the_delay() -> None:
    clock, frontier = make(delay=2.0)
    add(frontier, due("http://a.test/1"), due("http://a.test/2"))
    leases = run(clock, frontier, {"http://a.test": (200, ROBOTS_OK)})
    assert [lease.kind for lease in leases] == [LeaseKind.ROBOTS, LeaseKind.PAGE, LeaseKind.PAGE]
    assert leases[0].url == "http://a.test/robots.txt"
    starts = [lease.issued_at for lease in leases]
    assert all(b - a >= 2.0 for a, b in itertools.pairwise(starts))


def test_no_second_lease_while_one_is_in_flight() -> None:
    clock, frontier = make(delay=0.0)
    add(frontier, due("http://a.test/1"), due("http://a.test/2"))
    robots = frontier.next_lease()
    assert robots is not None and robots.kind is LeaseKind.ROBOTS
    assert frontier.next_lease() is None  # robots in flight blocks the host
    frontier.finish_robots(robots, 404)
    first = frontier.next_lease()
    assert first is not None and first.kind is LeaseKind.PAGE
    clock.advance(10)
    assert frontier.next_lease() is None  # max_in_flight = 1
    frontier.finish_page(first, FetchFeedback(200, 0.1))
    assert frontier.next_lease() is not None


def test_max_in_flight_override_allows_two() -> None:
    _clock, frontier = make(delay=0.0)
    add(frontier, due("http://a.test/1"), due("http://a.test/2"), due("http://a.test/3"))
    frontier.set_policy("http://a.test", HostPolicy(max_in_flight=2))
    robots = frontier.next_lease()
    assert robots is not None
    frontier.finish_robots(robots, 404)
    assert frontier.next_lease() is not None
    assert frontier.next_lease() is not None
    assert frontier.next_lease() is None


def test_disallowed_urls_are_denied_not_leased() -> None:
    clock, frontier = make()
    add(frontier, due("http://a.test/private/x"), due("http://a.test/ok"))
    leases = run(clock, frontier, {"http://a.test": (200, ROBOTS_OK)})
    assert [lease.url for lease in leases if lease.kind is LeaseKind.PAGE] == ["http://a.test/ok"]
    denied = frontier.take_denied()
    assert [(d.url, reason) for d, reason, _ in denied] == [("http://a.test/private/x", "robots")]
    assert denied[0][2] is not None  # the robots digest is kept for the audit trail


def test_robots_5xx_blocks_pages_and_retries_later() -> None:
    clock, frontier = make(release_horizon=10_000.0)
    add(frontier, due("http://a.test/1"))
    robots = frontier.next_lease()
    assert robots is not None
    frontier.finish_robots(robots, 503)
    clock.advance(30)
    assert frontier.next_lease() is None  # disallow all while unreachable
    clock.advance(60)
    retry = frontier.next_lease()
    assert retry is not None and retry.kind is LeaseKind.ROBOTS
    frontier.finish_robots(retry, 200, b"User-agent: *\nAllow: /\n")
    clock.advance(5)
    page = frontier.next_lease()
    assert page is not None and page.kind is LeaseKind.PAGE


def test_unreachable_robots_releases_urls_beyond_the_horizon() -> None:
    clock, frontier = make(release_horizon=30.0)
    add(frontier, due("http://a.test/1"))
    robots = frontier.next_lease()
    assert robots is not None
    frontier.finish_robots(robots, None)  # network error
    released = frontier.take_released()
    assert [d.url for d, _ in released] == ["http://a.test/1"]
    assert released[0][1] > clock.now() + 30
    assert frontier.queued == 0


def test_robots_4xx_allows_everything() -> None:
    clock, frontier = make()
    add(frontier, due("http://a.test/private/x"))
    leases = run(clock, frontier, {"http://a.test": (403, b"")})
    assert [lease.url for lease in leases][-1] == "http://a.test/private/x"


def test_crawl_delay_is_honoured_when_larger_than_the_delay() -> None:
    clock, frontier = make(delay=0.5)
    add(frontier, *(due(f"http://a.test/{i}") for i in range(4)))
    body = b"User-agent: courtier\nCrawl-delay: 3\nAllow: /\n"
    leases = run(clock, frontier, {"http://a.test": (200, body)})
    pages = [lease.issued_at for lease in leases if lease.kind is LeaseKind.PAGE]
    assert len(pages) == 4
    assert all(b - a >= 3.0 for a, b in itertools.pairwise(pages))


def test_retry_after_pauses_the_whole_host() -> None:
    clock, frontier = make(delay=1.0)
    add(frontier, due("http://a.test/1"), due("http://a.test/2"))
    robots = frontier.next_lease()
    assert robots is not None
    frontier.finish_robots(robots, 404)
    clock.advance(1)
    page = frontier.next_lease()
    assert page is not None
    frontier.finish_page(page, FetchFeedback(429, 0.1, retry_at=clock.now() + 20))
    clock.advance(19)
    assert frontier.next_lease() is None
    clock.advance(1)
    assert frontier.next_lease() is not None


def test_best_host_and_best_url_first() -> None:
    _clock, frontier = make(delay=0.0)
    add(frontier, due("http://low.test/1", priority=0), due("http://high.test/1", priority=5))
    for _ in range(2):  # robots of both
        lease = frontier.next_lease()
        assert lease is not None
        frontier.finish_robots(lease, 404)
    add(frontier, due("http://high.test/0", priority=9))
    first = frontier.next_lease()
    assert first is not None and first.url == "http://high.test/0"


def test_blocked_host_denies_its_urls() -> None:
    _clock, frontier = make()
    add(frontier, due("http://a.test/1"))
    frontier.set_policy("http://a.test", HostPolicy(blocked=True))
    assert frontier.next_lease() is None
    assert [reason for _, reason, _ in frontier.take_denied()] == ["blocked"]


def test_expired_robots_is_refetched_before_the_next_page() -> None:
    clock, frontier = make(delay=1.0, expiry=100.0)
    add(frontier, due("http://a.test/1"))
    run(clock, frontier, {"http://a.test": (200, ROBOTS_OK)})
    clock.advance(200)
    add(frontier, due("http://a.test/2"))
    lease = frontier.next_lease()
    assert lease is not None and lease.kind is LeaseKind.ROBOTS


def test_many_hosts_are_served_in_parallel_but_each_politely() -> None:
    clock, frontier = make(delay=5.0)
    urls = [due(f"http://h{h}.test/{i}") for h in range(20) for i in range(5)]
    add(frontier, *urls)
    leases = run(clock, frontier, {}, latency=0.0, limit=10_000)
    pages = [lease for lease in leases if lease.kind is LeaseKind.PAGE]
    assert len(pages) == 100
    by_host: dict[str, list[float]] = {}
    for lease in leases:
        by_host.setdefault(lease.host_key, []).append(lease.issued_at)
    for starts in by_host.values():
        assert all(b - a >= 5.0 for a, b in itertools.pairwise(starts))
    # 20 hosts in parallel: 6 requests per host at 5 s → about 25 s, not 100 × 5 s
    assert clock.now() - 1000.0 <= 30.0


def test_max_pages_per_day_pauses_the_host_until_the_next_day() -> None:
    clock, frontier = make(delay=1.0, release_horizon=10_000_000.0)
    add(frontier, *(due(f"http://a.test/{i}") for i in range(5)))
    frontier.set_policy("http://a.test", HostPolicy(max_pages=2))
    leases = run(clock, frontier, {}, limit=50)
    pages = [lease for lease in leases if lease.kind is LeaseKind.PAGE]
    assert len(pages) == 5
    first_day = [p for p in pages if p.issued_at < pages[0].issued_at + 24 * 3600]
    assert len(first_day) == 2
    assert pages[2].issued_at >= pages[0].issued_at + 24 * 3600


def test_policy_delay_override_applies_to_the_next_lease() -> None:
    clock, frontier = make(delay=1.0)
    add(frontier, *(due(f"http://a.test/{i}") for i in range(3)))
    robots = frontier.next_lease()
    assert robots is not None
    frontier.finish_robots(robots, 404)
    frontier.set_policy("http://a.test", HostPolicy(delay=10.0))
    leases = run(clock, frontier, {})
    starts = [lease.issued_at for lease in leases]
    assert all(b - a >= 10.0 for a, b in itertools.pairwise(starts))


def test_a_given_up_robots_txt_denies_its_urls_with_the_reason() -> None:
    """The host's robots state keeps why its robots.txt failed (the FetchError kind the
    worker passes); URLs given up after ``give_up_after`` failures carry it in their
    denial reason, which becomes their ``error_kind``. Checked red: without passing
    ``error_kind`` on, the reason reads plain ``robots_unreachable``."""
    clock = VirtualClock(1000.0)
    frontier = Frontier(clock, "courtier", DelayPolicy(delay=1.0, adaptive_factor=0.0),
                        RobotsPolicy(retry_base=1.0, retry_max=1.0, give_up_after=2),
                        release_horizon=10_000.0)
    add(frontier, due("https://a.test/1"), due("https://a.test/2"))
    for _ in range(2):
        lease = frontier.next_lease()
        assert lease is not None and lease.kind is LeaseKind.ROBOTS
        frontier.finish_robots(lease, None, error_kind="tls_unknown_issuer")
        assert frontier.hosts["https://a.test"].robots.last_error == "tls_unknown_issuer"
        clock.advance(2.0)
    assert frontier.next_lease() is None
    denied = frontier.take_denied()
    assert sorted((d.url, why) for d, why, _ in denied) == [
        ("https://a.test/1", "robots_unreachable:tls_unknown_issuer"),
        ("https://a.test/2", "robots_unreachable:tls_unknown_issuer")]


def test_robots_5xx_reason_is_the_status_and_a_success_clears_it() -> None:
    clock, frontier = make(release_horizon=10_000.0)
    add(frontier, due("http://a.test/1"))
    robots = frontier.next_lease()
    assert robots is not None
    frontier.finish_robots(robots, 503)
    state = frontier.hosts["http://a.test"].robots
    assert state.last_error == "http_503"
    clock.advance(90)
    retry = frontier.next_lease()
    assert retry is not None and retry.kind is LeaseKind.ROBOTS
    frontier.finish_robots(retry, 200, b"User-agent: *\nAllow: /\n")
    assert state.last_error is None


def test_a_low_priority_host_gets_one_grant_in_every_turn_while_better_hosts_wait() -> None:
    def low_grants(turn_every: int | None) -> int:
        clock, frontier = make(delay=1.0, turn_every=turn_every)
        rows = [due(f"http://high{h}.example/p{i}", priority=5) for h in range(40)
                for i in range(50)] + [due(f"http://low.example/p{i}") for i in range(50)]
        for row in rows:
            if not frontier.knows_host(row.host_key):  # robots.txt known: 404, allow all
                frontier.register_host(row.host_key, row.shard, HostRecord(
                    row.host_key, row.shard, robots_status=404, robots_fetched_at=1000.0,
                    robots_expires_at=10**9))
        frontier.add(rows)
        granted = []
        while len(granted) < 20 * TURN_EVERY:
            clock.advance(1.0)  # every host is ready again; a budget of 5 grants a second
            frontier.rerank()   # every ready entry goes stale (and is skipped, uncounted)
            for _ in range(5):
                lease = frontier.next_lease()
                assert lease is not None and lease.kind is LeaseKind.PAGE
                granted.append(lease.host_key)
                frontier.finish_page(lease, FetchFeedback(200, 0.0))
        return granted.count("http://low.example")

    assert low_grants(TURN_EVERY) == 20  # exactly its turns: one in every TURN_EVERY
    assert low_grants(None) == 0  # strict priority: never, while a better host is ready


def test_what_the_frontier_holds_is_what_a_refill_must_skip() -> None:
    """``holding_hosts`` names hosts with URLs queued or denied and not taken yet, and
    ``hand_back_stale`` drops (without a hand-back to write) the queues held that long,
    so the next refill reads those hosts afresh. Seen red with ``filled_at`` set at every
    ``add`` (b's queue, topped up, never counted as old: 1 URL dropped, not 4)."""
    clock, frontier = make()
    add(frontier, due("http://a.test/1"))
    add(frontier, due("http://b.test/1"), due("http://b.test/2"))
    add(frontier, due("http://c.test/1"))
    frontier.set_policy("http://c.test", HostPolicy(blocked=True))  # denied, not taken
    assert frontier.holding_hosts() == {"http://a.test", "http://b.test", "http://c.test"}
    assert len(frontier.take_denied()) == 1
    clock.advance(50.0)
    add(frontier, due("http://b.test/3"))  # b's queue holds URLs since 1000 s still
    add(frontier, due("http://d.test/1"))
    clock.advance(20.0)
    assert frontier.hand_back_stale(60.0) == 4  # a's and b's, not d's (20 s)
    assert frontier.queued == 1
    assert frontier.holding_hosts() == {"http://d.test"}
    assert frontier.take_released() == []  # nothing to write: the rows are QUEUED as read
