"""The expected-gain refresh planner, expressed as each row's ``priority`` and ``next_fetch_at``.

Pure, takes ``now``; no I/O (the worker feeds it stored values and host
overrides). ``docs/freshness.md`` §3 has the formulas; in short, at every commit:

* ``r`` is the change rate the estimator believes (Cho & Garcia-Molina blended
  with the prior, :func:`courtier.frontier.recrawl.blended_rate`), ``I_est`` the
  interval it proposes within the URL's tier, and ``v`` the URL's (effective) value.
* Under a daily budget the planner holds a *cost per fetch* ``c`` (value ×
  seconds). A page's budget interval ``I_b`` solves ``1 − (1 + x)·e^(−x) = c·r / v``
  with ``x = r·I_b``: the interval that maximises ``v`` × its time-averaged freshness
  ``(1 − e^(−rI)) / (rI)`` minus ``c`` × its fetches per second (Cho & Garcia-Molina's
  optimal allocation with a Lagrange multiplier); none — the tier's maximum — when
  ``c·r ≥ v``, i.e. a page changing so fast for its value that refreshing it buys
  almost no freshness. The interval is ``clamp_tier(max(I_est, min(I_b, growth ·
  I_last)))``: valuable pages keep short intervals, others stretch (at most doubling
  per visit) towards the tier's maximum, which bounds every page: the long tail is
  refreshed at least that often.
* ``c`` is adjusted so the planned load ``Σ 86 400 / I`` (fetches/day) of the
  owned shards stays at ``(1 − tail_share)`` of their share of the budget; the rest
  is headroom for new URLs and the refill's overdue-first guarantee.
* The row's priority is the expected gain at its due time,
  ``g = v · (1 − e^(−r·I))`` (value × probability it changed since the visit), as
  its decile among the gains recently planned, minus 4 (deciles 0 … 4 share
  priority 0 with links never fetched, so discovery is not starved): 0 … 5, as
  the change-rate priorities before it, below seeds (10). When more
  is due than the budget allows, the store's refill (overdue first, then priority
  DESC, then next_fetch_at) takes the highest gains: the refill SQL is unchanged.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from courtier.frontier.recrawl import DAY

__all__ = ["GAIN_LEVELS", "BudgetController", "GainScale", "budget_interval", "change_probability",
           "expected_gain_at", "gain_priority"]

#: planner priorities are 0 … GAIN_LEVELS − 1 (seeds are 10)
GAIN_LEVELS = 10
#: gain of level 0 on the fixed scale (each level above is √2 times more)
GAIN_FLOOR = 1.0 / 16.0
#: the cost per fetch stays within these bounds (value units)
MIN_COST, MAX_COST = 1e-3, 1e6 * DAY
INITIAL_COST = 0.05 * DAY
#: per adjustment the cost moves by at most this factor
MAX_STEP = 2.0


def change_probability(rate: float, seconds: float) -> float:
    """P(at least one change in ``seconds``) for a Poisson rate: ``1 − e^(−r·s)``."""
    if rate <= 0 or seconds <= 0:
        return 0.0
    return -math.expm1(-rate * seconds)


def expected_gain_at(value: float, rate: float, seconds: float) -> float:
    """``value · (1 − e^(−r·s))``: what refreshing ``seconds`` after the visit is worth."""
    return max(0.0, value) * change_probability(rate, seconds)


def gain_priority(value: float, rate: float, interval: float) -> int:
    """The expected gain at the due time on a fixed scale: half-octave steps from
    ``g`` = 1/16 (level 0) to ``g`` ≥ 1.41 (level 9)."""
    gain = expected_gain_at(value, rate, interval)
    if gain <= GAIN_FLOOR:
        return 0
    return min(GAIN_LEVELS - 1, int(2.0 * math.log2(gain / GAIN_FLOOR)))


class GainScale:
    """Maps a gain to its decile among the last ``window`` gains planned (0 … 9).

    Values come from anywhere (derived ~0.1 … 2, imported search-engine scores of any
    scale), so a fixed scale would crowd them into one level; deciles of recent gains
    use all ten levels whatever the scale. Until ``refresh`` gains were seen the fixed
    log₂ scale (:func:`gain_priority`) is used.
    """

    def __init__(self, window: int = 4096, refresh: int = 128) -> None:
        self._recent: deque[float] = deque(maxlen=window)
        self._refresh = refresh
        self._since = 0
        self._cuts: list[float] = []

    def level(self, value: float, rate: float, interval: float) -> int:
        gain = expected_gain_at(value, rate, interval)
        self._recent.append(gain)
        self._since += 1
        if self._since >= self._refresh:
            ordered = sorted(self._recent)
            n = len(ordered)
            self._cuts = [ordered[(n * k) // GAIN_LEVELS] for k in range(1, GAIN_LEVELS)]
            self._since = 0
        if not self._cuts:
            return gain_priority(value, rate, interval)
        return bisect.bisect_right(self._cuts, gain)


def budget_interval(rate: float, value: float, cost: float) -> float:
    """The interval maximising ``value · F(r, I) − cost / I`` (∞: not worth a fetch).

    ``F = (1 − e^(−rI)) / (rI)`` is the time-averaged freshness of a Poisson page
    refreshed every ``I``; a zero derivative gives ``1 − (1 + x)·e^(−x) = cost·r / value``
    with ``x = r·I`` (the left side rises from 0 to 1), solved by bisection. 0 without a
    cost (no budget) or for a page never seen to change: the estimator decides alone."""
    if cost <= 0 or rate <= 0:
        return 0.0
    if value <= 0:
        return math.inf
    target = cost * rate / value
    if target >= 1.0:
        return math.inf
    low, high = 0.0, 1.0
    while 1.0 - (1.0 + high) * math.exp(-high) < target and high < 700:
        high *= 2.0
    for _ in range(60):
        mid = (low + high) / 2
        if 1.0 - (1.0 + mid) * math.exp(-mid) < target:
            low = mid
        else:
            high = mid
    return high / rate


@dataclass(slots=True)
class BudgetController:
    """The cost per fetch of one worker's shards and the planned load by tier.

    ``daily_budget`` None means no budget: the cost is 0 and intervals are the
    estimator's. ``share`` is the part of the crawl-wide budget these shards own.
    """

    daily_budget: int | None
    tail_share: float = 0.1
    share: float = 1.0
    cost: float = 0.0
    planned: dict[str, float] = field(default_factory=dict)   # fetches/day by tier
    spent: dict[str, int] = field(default_factory=dict)       # fetches in the window
    window_start: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.tail_share < 1.0:
            raise ValueError(f"tail_share must be in [0, 1), got {self.tail_share}")
        if self.daily_budget is not None and self.cost == 0.0:
            self.cost = INITIAL_COST

    @property
    def target(self) -> float | None:
        """Planned fetches/day the cost aims at (None without a budget)."""
        if self.daily_budget is None:
            return None
        return self.daily_budget * self.share * (1.0 - self.tail_share)

    def replan(self, tier: str, old_interval: float | None, new_interval: float | None) -> None:
        """A row moved from ``old_interval`` to ``new_interval`` (None: not planned)."""
        load = self.planned.get(tier, 0.0)
        if old_interval is not None and old_interval > 0:
            load -= DAY / old_interval
        if new_interval is not None and new_interval > 0:
            load += DAY / new_interval
        self.planned[tier] = max(0.0, load)

    def count_fetch(self, tier: str, now: float) -> None:
        """One fetch of ``tier`` started (spent in the current 24 h window)."""
        if self.window_start is None or now - self.window_start >= DAY:
            self.window_start, self.spent = now, {}
        self.spent[tier] = self.spent.get(tier, 0) + 1

    def adjust(self, elapsed: float) -> float:
        """One control step ``elapsed`` seconds after the last: the cost moves by
        ``ratio^(elapsed / 3 days)`` with ``ratio = planned / target`` clamped to ½ … 2,
        so at most ×2 or ÷2 in three days — slower than the rows it steers are replanned
        (a faster controller overshoots, because the planned load only follows the cost
        as rows are fetched again)."""
        target = self.target
        if target is None or target <= 0:
            return self.cost
        load = sum(self.planned.values())
        ratio = max(1.0 / MAX_STEP, min(MAX_STEP, (load + 1.0) / target))
        step = ratio ** (max(0.0, elapsed) / (3 * DAY))
        self.cost = max(MIN_COST, min(MAX_COST, self.cost * step))
        return self.cost

    def view(self, names: Mapping[str, object] | None = None) -> dict[str, dict[str, float]]:
        """Planned fetches/day and fetches spent in the window, by tier."""
        tiers = set(self.planned) | set(self.spent) | set(names or {})
        return {t: {"planned_per_day": round(self.planned.get(t, 0.0), 1),
                    "spent": self.spent.get(t, 0)} for t in sorted(tiers)}
