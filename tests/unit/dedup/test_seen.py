"""Tests of the seen filter: no false negatives, measured false-positive rate."""

from __future__ import annotations

import random

import pytest

from courtier.core.errors import ConfigError
from courtier.core.urls import make_url_key
from courtier.dedup.seen import SeenFilter

N = 100_000


def _keys(tag: str, count: int, hosts: int = 50) -> list[bytes]:
    """Realistic url_keys: many URLs over a few hosts (shared 4-byte prefixes)."""
    return [
        make_url_key(f"http://h{i % hosts}.test", f"http://h{i % hosts}.test/{tag}/{i}")
        for i in range(count)
    ]


def test_no_false_negatives_on_100k_keys() -> None:
    seen = SeenFilter(expected_items=N, false_positive_rate=0.01)
    keys = _keys("added", N)
    for key in keys:
        seen.add(key)
    missing = [key for key in keys if not seen.maybe_seen(key)]
    assert missing == []


def test_false_positive_rate_below_twice_configured() -> None:
    rate = 0.01
    seen = SeenFilter(expected_items=N, false_positive_rate=rate)
    for key in _keys("added", N):
        seen.add(key)
    fresh = _keys("fresh", N)
    false_positives = sum(1 for key in fresh if seen.maybe_seen(key))
    measured = false_positives / N
    assert measured < 2 * rate, f"measured false-positive rate {measured:.4f}"


def test_false_positive_rate_on_random_keys_at_tighter_rate() -> None:
    rng = random.Random(20240601)
    rate = 0.001
    seen = SeenFilter(expected_items=N, false_positive_rate=rate)
    for _ in range(N):
        seen.add(rng.randbytes(16))
    false_positives = sum(1 for _ in range(N) if seen.maybe_seen(rng.randbytes(16)))
    assert false_positives / N < 2 * rate


def test_empty_filter_says_definitely_new() -> None:
    seen = SeenFilter(expected_items=1000)
    assert not seen.maybe_seen(b"\x00" * 16)
    assert not any(seen.maybe_seen(key) for key in _keys("x", 1000))


def test_filter_new_returns_new_keys_in_order_and_adds_them() -> None:
    seen = SeenFilter(expected_items=10_000)
    first = _keys("a", 100)
    assert seen.filter_new(first) == first
    assert all(seen.maybe_seen(key) for key in first)
    second = _keys("b", 100)
    mixed = [k for pair in zip(first, second, strict=True) for k in pair]
    # Every key of `first` is now "maybe seen"; the `second` ones are new
    # (up to a false positive, vanishingly unlikely at this fill level).
    assert seen.filter_new(mixed) == second
    assert seen.filter_new(mixed) == []


def test_filter_new_deduplicates_within_one_batch() -> None:
    seen = SeenFilter(expected_items=1000)
    a, b = _keys("dup", 2)
    assert seen.filter_new([a, b, a, a, b]) == [a, b]


def test_add_then_maybe_seen_and_clear() -> None:
    seen = SeenFilter(expected_items=1000)
    key = make_url_key("http://example.com", "http://example.com/")
    seen.add(key)
    assert seen.maybe_seen(key)
    assert seen.approx_items == pytest.approx(1.0, abs=0.5)
    seen.clear()
    assert not seen.maybe_seen(key)


def test_memory_matches_design_budget() -> None:
    # DESIGN.md: about 12 MB per 10 million keys at 1 %.
    seen = SeenFilter(expected_items=10_000_000, false_positive_rate=0.01)
    megabytes = seen.size_in_bits / 8 / 1e6
    assert 10 < megabytes < 14
    assert seen.expected_items == 10_000_000
    assert seen.false_positive_rate == 0.01


@pytest.mark.parametrize(
    ("expected_items", "rate"), [(0, 0.01), (-5, 0.01), (100, 0.0), (100, 1.0), (100, -0.1)]
)
def test_bad_sizing_is_a_config_error(expected_items: int, rate: float) -> None:
    with pytest.raises(ConfigError):
        SeenFilter(expected_items=expected_items, false_positive_rate=rate)
