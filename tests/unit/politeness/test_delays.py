"""Delay arithmetic: effective delay, adaptive delay, back-off, Retry-After."""

from __future__ import annotations

import random

import pytest

from courtier.politeness.delays import DelayPolicy, HostTiming, effective_delay, parse_retry_after

NOW = 1_700_000_000.0


def test_effective_delay_is_the_largest_of_all() -> None:
    policy = DelayPolicy(delay=1.0)
    timing = HostTiming(adaptive_delay=0.5)
    assert effective_delay(policy, timing, None) == 1.0
    assert effective_delay(policy, timing, 4.0) == 4.0
    assert effective_delay(policy, timing, 4.0, override_delay=9.0) == 9.0
    timing.adaptive_delay = 12.0
    assert effective_delay(policy, timing, 4.0) == 12.0


def test_adaptive_delay_grows_at_once_and_recovers_slowly() -> None:
    policy = DelayPolicy(adaptive_factor=5.0, max_adaptive_delay=30.0, adaptive_recovery=0.3)
    timing = HostTiming()
    timing.record_success(2.0, policy)
    assert timing.adaptive_delay == 10.0
    timing.record_success(100.0, policy)
    assert timing.adaptive_delay == 30.0  # capped
    timing.record_success(0.0, policy)
    assert 20.0 < timing.adaptive_delay < 30.0  # one fast answer does not reset it


def test_backoff_is_exponential_capped_and_jittered() -> None:
    policy = DelayPolicy(backoff_base=5.0, backoff_max=100.0, backoff_jitter=0.25)
    timing = HostTiming()
    rng = random.Random(1)
    waits = [timing.record_failure(NOW, policy, rng) - NOW for _ in range(8)]
    assert 3.75 <= waits[0] <= 6.25
    assert all(w <= 125.0 for w in waits)
    timing.record_success(0.1, policy)
    assert timing.failures == 0


def test_retry_after_wins_over_backoff() -> None:
    timing = HostTiming()
    until = timing.record_failure(NOW, DelayPolicy(), random.Random(0), retry_at=NOW + 500)
    assert until == NOW + 500


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", NOW + 120),
        ("0", NOW),
        ("Sun, 06 Nov 1994 08:49:37 GMT", NOW),  # in the past: no wait
        ("Wed, 15 Nov 2023 22:13:20 GMT", 1_700_086_400.0),
        ("Wednesday, 15-Nov-23 22:13:20 GMT", 1_700_086_400.0),
        ("Wed Nov 15 22:13:20 2023", 1_700_086_400.0),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected
