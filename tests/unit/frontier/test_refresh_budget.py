"""Refreshes under a fetch budget: expected gain, the day's picks, the fetch load."""

from __future__ import annotations

import math

import pytest

from courtier.core.records import DAY
from courtier.frontier.refresh_budget import (
    RefreshCandidate,
    expected_gain,
    plan_refresh,
    refresh_load,
)

T0 = 1_700_000_000.0


def test_expected_gain() -> None:
    c = RefreshCandidate(b"k", 1 / DAY, 2.0, T0)
    assert expected_gain(c, T0) == pytest.approx(2.0 * (1 - math.exp(-1)))
    late = RefreshCandidate(b"k", 1 / DAY, 2.0, T0 - DAY)
    assert expected_gain(late, T0) > expected_gain(c, T0)
    assert expected_gain(RefreshCandidate(b"k", 0.0, 5.0, T0), T0) == 0.0


def test_plan_refresh_all_fit() -> None:
    cands = [RefreshCandidate(bytes([i]), 1e-5, 1.0, T0 - i) for i in range(5)]
    assert plan_refresh(cands, 10, 0.2, now=T0) == [bytes([i]) for i in reversed(range(5))]


def test_plan_refresh_value_first_with_minimum_guarantee() -> None:
    hot = [RefreshCandidate(b"hot%d" % i, 1 / DAY, 10.0 + i, T0) for i in range(10)]
    cold = [RefreshCandidate(b"cold%d" % i, 1e-9, 0.1, T0 - (i + 1) * DAY) for i in range(10)]
    picked = plan_refresh(hot + cold, 10, 0.2, now=T0)
    assert len(picked) == 10
    # 8 slots by gain: the 8 most valuable hot pages, best first
    assert picked[:8] == [b"hot%d" % i for i in range(9, 1, -1)]
    # 2 reserved slots: the most overdue of the rest (cold9, cold8 are oldest)
    assert picked[8:] == [b"cold9", b"cold8"]
    assert plan_refresh(hot + cold, 10, 0.0, now=T0) == [b"hot%d" % i for i in range(9, -1, -1)]
    assert plan_refresh(hot + cold, 0, 0.5, now=T0) == []


def test_plan_refresh_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        plan_refresh([], -1, 0.1, now=T0)
    with pytest.raises(ValueError):
        plan_refresh([], 1, 1.5, now=T0)


def test_refresh_load() -> None:
    assert refresh_load([DAY, DAY / 2, 7 * DAY, None]) == pytest.approx(1 + 2 + 1 / 7)
    assert refresh_load([]) == 0.0
    with pytest.raises(ValueError):
        refresh_load([0.0])
