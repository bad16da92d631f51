"""Delay arithmetic: effective delay, adaptive delay, back-off, Retry-After."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtier.politeness.delays import (
    DelayPolicy,
    HostTiming,
    base_delay,
    effective_delay,
    parse_retry_after,
)

NOW = 1_700_000_000.0


def test_effective_delay_is_the_largest_of_all() -> None:
    policy = DelayPolicy(delay=1.0)
    timing = HostTiming(adaptive_delay=0.5)
    assert effective_delay(policy, timing, None) == 1.0
    assert effective_delay(policy, timing, 4.0) == 4.0
    assert effective_delay(policy, timing, 4.0, override_delay=9.0) == 9.0
    timing.adaptive_delay = 12.0
    assert effective_delay(policy, timing, 4.0) == 12.0


_DELAYS = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(_DELAYS, st.none() | _DELAYS, st.none() | _DELAYS, _DELAYS, _DELAYS)
def test_effective_delay_is_the_max_of_its_parts(
        configured: float, crawl_delay: float | None, override: float | None,
        adaptive: float, throttle: float) -> None:
    timing = HostTiming(adaptive_delay=adaptive, throttle_delay=throttle)
    asked = configured if override is None else override
    expected = max(asked, crawl_delay or 0.0, adaptive, throttle)
    assert effective_delay(DelayPolicy(delay=configured), timing, crawl_delay, override) == expected
    assert base_delay(DelayPolicy(delay=configured), crawl_delay, override) == max(
        asked, crawl_delay or 0.0)


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
    """The whole sequence: each wait doubles (within ±jitter) until the cap, then stays there."""
    policy = DelayPolicy(backoff_base=5.0, backoff_max=100.0, backoff_jitter=0.25)
    timing = HostTiming()
    rng = random.Random(1)
    now = NOW  # a fake clock: each retry happens exactly when the back-off runs out
    waits = []
    for _ in range(9):
        until = timing.record_failure(now, policy, rng)
        waits.append(until - now)
        now = until
    nominal = [5.0, 10.0, 20.0, 40.0, 80.0, 100.0, 100.0, 100.0, 100.0]
    for n, (wait, step) in enumerate(zip(waits, nominal, strict=True)):
        assert 0.75 * step <= wait <= 1.25 * step, (n, wait, step)  # constant/linear fail
    timing.record_success(0.1, policy)
    assert timing.failures == 0
    # after a success the sequence starts again from the base
    assert 3.75 <= timing.record_failure(now, policy, rng) - now <= 6.25


@pytest.mark.parametrize("seed", range(20))
def test_backoff_doubles_within_jitter_for_any_rng(seed: int) -> None:
    policy = DelayPolicy(backoff_base=2.0, backoff_max=64.0, backoff_jitter=0.1)
    timing, rng, now = HostTiming(), random.Random(seed), NOW
    waits = []
    for _ in range(8):
        until = timing.record_failure(now, policy, rng)
        waits.append(until - now)
        now = until
    for n, wait in enumerate(waits):
        step = min(64.0, 2.0 * 2**n)
        assert 0.9 * step <= wait <= 1.1 * step, (seed, n, wait)
    # with ±10 % jitter a doubling step is always larger than the previous one
    assert all(b > a for a, b in itertools.pairwise(waits[:6]))


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



_ANY_FLOAT = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                       st.sampled_from([0.0, -0.0, 30.0]))


def _record_success_with_builtins(adaptive: float, elapsed: float, policy: DelayPolicy) -> float:
    """record_success's adaptive delay as written before it compared instead of calling
    min() and max()."""
    sample = min(policy.max_adaptive_delay, policy.adaptive_factor * max(0.0, elapsed))
    if sample >= adaptive:
        return sample
    w = policy.adaptive_recovery
    return (1 - w) * adaptive + w * sample


@settings(max_examples=500, deadline=None)
@given(_ANY_FLOAT, _ANY_FLOAT, _ANY_FLOAT, _ANY_FLOAT, st.floats(0.0, 1.0))
def test_record_success_agrees_with_the_min_max_formula(
        elapsed: float, factor: float, cap: float, before: float, recovery: float) -> None:
    policy = DelayPolicy(adaptive_factor=factor, max_adaptive_delay=cap,
                         adaptive_recovery=recovery)
    timing = HostTiming(adaptive_delay=before, failures=3)
    timing.record_success(elapsed, policy)
    expected = _record_success_with_builtins(before, elapsed, policy)
    assert repr(timing.adaptive_delay) == repr(expected)  # bit for bit, NaN and -0.0 too
    assert timing.failures == 0
