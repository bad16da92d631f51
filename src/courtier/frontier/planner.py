"""The expected-gain refresh planner, expressed as each row's ``priority`` and ``next_fetch_at``.

Pure, takes ``now``; no I/O (the worker feeds it stored values and host
overrides). ``docs/freshness.md`` §3 has the formulas; in short, at every commit:

* ``r = 1 / I_est`` is the change rate the tier-bounded estimator believes
  (``I_est`` from :func:`courtier.frontier.recrawl.schedule_after` under the
  URL's tier), and ``v`` the URL's (effective) value.
* Under a daily budget the planner holds a *cost per fetch* ``c`` (seconds ×
  value). A page's budget interval ``I_b`` solves ``1 − (1 + x)·e^(−x) = c·r / v``
  with ``x = r·I_b`` (the interval that maximises ``v`` × time-averaged
  freshness minus ``c`` × fetches; none — the tier's max — when ``c·r ≥ v``).
  The interval is ``clamp_tier(max(I_est, I_b))``: valuable, changing pages keep
  short intervals, cheap or hopelessly fast-changing ones stretch towards the tier's
  maximum, which bounds every page (the long tail is refreshed at least that often).
* ``c`` is adjusted so the planned load ``Σ 86 400 / I`` (fetches/day) of the
  owned shards stays at ``(1 − tail_share)`` of their share of the budget; the rest
  is headroom for new URLs and the refill's overdue-first guarantee.
* The row's priority is the expected gain at its due time,
  ``g = v · (1 − e^(−r·I))`` (value × probability it changed since the visit), on
  a log₂ scale: levels 0 … 9 (``g`` from 1/64 to 8), below seeds (10). When more
  is due than the budget allows, the store's refill (overdue first, then priority
  DESC, then next_fetch_at) takes the highest gains: the refill SQL is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from courtier.frontier.recrawl import DAY

__all__ = ["GAIN_LEVELS", "BudgetController", "budget_interval", "change_probability",
           "expected_gain_at", "gain_priority"]

#: planner priorities are 0 … GAIN_LEVELS − 1 (seeds are 10)
GAIN_LEVELS = 10
#: gain of level 0 (each level above doubles it)
GAIN_FLOOR = 1.0 / 64.0
#: the cost per fetch stays within these bounds (seconds × value)
MIN_COST, MAX_COST = 1.0, 1e4 * DAY
INITIAL_COST = 0.1 * DAY
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
    """The row priority encoding the expected gain at its due time (0 … 9, log₂ steps)."""
    gain = expected_gain_at(value, rate, interval)
    if gain <= GAIN_FLOOR:
        return 0
    return min(GAIN_LEVELS - 1, int(math.log2(gain / GAIN_FLOOR)))


def budget_interval(rate: float, value: float, cost: float) -> float:
    """The interval that maximises ``value · F(r, I) − cost / I`` (∞: not worth a fetch).

    ``F = (1 − e^(−rI)) / (rI)`` is the time-averaged freshness of a Poisson page
    refreshed every ``I``; setting the derivative to zero gives
    ``1 − (1 + x)·e^(−x) = cost·r / value`` with ``x = r·I``, solved by bisection.
    """
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

    def adjust(self) -> float:
        """One control step: raise the cost when the planned load exceeds the target,
        lower it when below (by the square root of the ratio, at most ×2 or ÷2)."""
        target = self.target
        if target is None or target <= 0:
            return self.cost
        load = sum(self.planned.values())
        ratio = max(1.0 / MAX_STEP, min(MAX_STEP, (load + 1.0) / target))
        self.cost = max(MIN_COST, min(MAX_COST, self.cost * math.sqrt(ratio)))
        return self.cost

    def view(self, names: Mapping[str, object] | None = None) -> dict[str, dict[str, float]]:
        """Planned fetches/day and fetches spent in the window, by tier."""
        tiers = set(self.planned) | set(self.spent) | set(names or {})
        return {t: {"planned_per_day": round(self.planned.get(t, 0.0), 1),
                    "spent": self.spent.get(t, 0)} for t in sorted(tiers)}
