"""AIMD throttle: a 429/503 halves a host's allowed rate; successes add it back slowly;
never faster than the configured delay or Crawl-delay."""

from __future__ import annotations

import itertools
import random

import pytest

from courtier.core.clock import VirtualClock
from courtier.frontier import FetchFeedback, Frontier, LeaseKind
from courtier.politeness.delays import DelayPolicy, HostTiming, effective_delay
from courtier.politeness.robots_state import RobotsPolicy
from tests.unit.frontier.test_scheduler import add, due

POLICY = DelayPolicy(delay=1.0, adaptive_factor=0.0)


def test_each_overload_halves_the_rate_from_the_delay_in_force() -> None:
    timing = HostTiming()
    delays = [timing.throttle(effective_delay(POLICY, timing, None), POLICY) for _ in range(4)]
    assert delays == [2.0, 4.0, 8.0, 16.0]
    assert effective_delay(POLICY, timing, None) == 16.0
    assert timing.throttle_events == 4


def test_throttle_starts_from_crawl_delay_and_is_capped() -> None:
    timing = HostTiming()
    assert timing.throttle(effective_delay(POLICY, timing, 10.0), POLICY) == 20.0
    capped = DelayPolicy(delay=1.0, throttle_max_delay=30.0)
    for _ in range(5):
        timing.throttle(timing.throttle_delay, capped)
    assert timing.throttle_delay == 30.0


def test_additive_recovery_is_slow_and_stops_at_the_base_delay() -> None:
    timing = HostTiming()
    timing.throttle(1.0, POLICY)  # rate 0.5/s
    timing.throttle(2.0, POLICY)  # rate 0.25/s
    rates = []
    while timing.throttle_delay > 0:
        timing.recover(1.0, POLICY)
        rates.append(1.0 / timing.throttle_delay if timing.throttle_delay else None)
        assert len(rates) < 100
    # +0.05/s per success: 0.30, 0.35, … — 15 successes back to the base rate of 1/s
    assert rates[0] == pytest.approx(0.30)
    assert rates[1] == pytest.approx(0.35)
    assert len(rates) == 15
    assert all(r is None or r <= 1.0 for r in rates)
    assert effective_delay(POLICY, timing, None) == 1.0  # never below the configured delay


def test_recovery_never_undercuts_crawl_delay_or_a_host_override() -> None:
    timing = HostTiming()
    timing.throttle(5.0, POLICY)   # 10 s
    for _ in range(200):
        timing.recover(5.0, POLICY)
    assert timing.throttle_delay == 0.0
    assert effective_delay(POLICY, timing, 5.0) == 5.0
    assert effective_delay(POLICY, timing, None, override_delay=7.0) == 7.0


def test_a_new_overload_during_recovery_halves_again() -> None:
    timing = HostTiming()
    timing.throttle(1.0, POLICY)
    for _ in range(5):
        timing.recover(1.0, POLICY)
    before = timing.throttle_delay
    timing.throttle(effective_delay(POLICY, timing, None), POLICY)
    assert timing.throttle_delay == pytest.approx(before * 2)


def test_frontier_spaces_requests_by_the_throttled_rate_after_the_backoff() -> None:
    clock = VirtualClock(1000.0)
    policy = DelayPolicy(delay=1.0, adaptive_factor=0.0, backoff_base=5.0, backoff_jitter=0.0)
    frontier = Frontier(clock, "courtier", policy, RobotsPolicy(expiry=1e9),
                        rng=random.Random(0))
    add(frontier, *(due(f"http://a.test/{i}") for i in range(40)))
    starts: list[float] = []
    statuses = iter([429] + [200] * 60)
    for _ in range(200):
        lease = frontier.next_lease()
        if lease is None:
            wake = frontier.next_wake_at()
            if wake is None:
                break
            clock.set(max(clock.now(), wake))
            continue
        if lease.kind is LeaseKind.ROBOTS:
            frontier.finish_robots(lease, 404, b"")
            continue
        starts.append(clock.now())
        frontier.finish_page(lease, FetchFeedback(next(statuses), 0.0))
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps[0] >= 5.0                       # the back-off after the 429
    assert gaps[1] == pytest.approx(2.0)        # throttled: the rate halved (from 1/s)
    assert gaps[2] == pytest.approx(1 / 0.55)   # + 0.05/s after one success
    assert all(b <= a + 1e-9 for a, b in itertools.pairwise(gaps[1:]))  # recovering
    assert all(g >= 1.0 - 1e-9 for g in gaps)   # never faster than the configured delay
    assert gaps[-1] == pytest.approx(1.0)       # fully recovered
    host = frontier.hosts["http://a.test"]
    assert host.timing.throttle_delay == 0.0 and host.timing.throttle_events == 1
