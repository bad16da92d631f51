"""Refreshes under a fetch budget: which of a candidate list a day's budget buys, and
how many fetches a day a set of recrawl intervals costs.

Pure arithmetic, like :mod:`courtier.frontier.recrawl` (which re-exports these names):
callers pass ``now``. :func:`plan_refresh` ranks the candidates by :func:`expected_gain`
(value × probability the copy is stale by the end of the horizon) and keeps a share of
the budget for the most overdue of the rest; :func:`refresh_load` converts intervals
into fetches per day. The crawl itself spends its budget through the per-row planner
(``planner.py``); ``docs/freshness.md`` §10.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from typing import NamedTuple

from courtier.core.records import DAY

__all__ = ["RefreshCandidate", "expected_gain", "plan_refresh", "refresh_load"]


class RefreshCandidate(NamedTuple):
    """A URL that could be refreshed today."""

    url_key: bytes
    change_rate: float  # changes per second (estimate_change_rate, or 1 / prior interval)
    value: float  # importance weight >= 0 (e.g. from priority, depth, traffic)
    due: float  # its next_fetch_at


def expected_gain(candidate: RefreshCandidate, now: float, horizon: float = DAY) -> float:
    """``value · (1 − e^(−r·s))``: value × probability the page changed since it fell due.

    ``s = max(0, now − due) + horizon``: how stale the copy is by the end of
    the planning horizon if it is not refreshed.
    """
    staleness = max(0.0, now - candidate.due) + horizon
    rate = max(0.0, candidate.change_rate)
    return max(0.0, candidate.value) * -math.expm1(-rate * staleness)


def plan_refresh(
    candidates: Iterable[RefreshCandidate],
    daily_budget: int,
    min_refresh_fraction: float,
    *,
    now: float,
    horizon: float = DAY,
) -> list[bytes]:
    """The ``url_key`` values to refresh within ``horizon``, at most ``daily_budget`` of them.

    When all candidates fit, all are returned. Otherwise
    ``ceil(min_refresh_fraction · budget)`` slots are reserved for the
    candidates the value ranking leaves out, taken most overdue first (so
    low-value pages are refreshed eventually), and the remaining slots go
    to the highest :func:`expected_gain` (ties: earlier due, then key).
    Order of the result: by gain first, then the reserved picks.
    Raises :class:`ValueError` for a negative budget or a fraction outside 0…1.
    """
    if daily_budget < 0:
        raise ValueError(f"daily_budget must be >= 0, got {daily_budget}")
    if not 0.0 <= min_refresh_fraction <= 1.0:
        raise ValueError(f"min_refresh_fraction must be in 0..1, got {min_refresh_fraction}")
    pool = list(candidates)
    if len(pool) <= daily_budget:
        return [c.url_key for c in sorted(pool, key=lambda c: (c.due, c.url_key))]
    reserved = min(daily_budget, math.ceil(min_refresh_fraction * daily_budget))
    by_gain = heapq.nsmallest(
        daily_budget - reserved,
        range(len(pool)),
        key=lambda i: (-expected_gain(pool[i], now, horizon), pool[i].due, pool[i].url_key),
    )
    chosen = set(by_gain)
    rest = (i for i in range(len(pool)) if i not in chosen)
    overdue = heapq.nsmallest(reserved, rest, key=lambda i: (pool[i].due, pool[i].url_key))
    return [pool[i].url_key for i in by_gain + overdue]


def refresh_load(intervals: Iterable[float | None]) -> float:
    """Fetches per day that URLs recrawled at these intervals cause (None = retired, ignored).

    Raises :class:`ValueError` for an interval that is not positive.
    """
    total = 0.0
    for interval in intervals:
        if interval is None:
            continue
        if not interval > 0:
            raise ValueError(f"recrawl interval must be positive, got {interval}")
        total += DAY / interval
    return total
