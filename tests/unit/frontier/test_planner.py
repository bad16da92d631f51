"""Expected gain, the budget interval, gain levels, the controller and per-commit plans."""

from __future__ import annotations

import json
import math

import pytest

from courtier.core.outcome import Outcome
from courtier.frontier.planner import (
    BudgetController,
    GainScale,
    budget_interval,
    change_probability,
    expected_gain_at,
)
from courtier.frontier.recrawl import DAY, ChangeStats, RecrawlPolicy
from courtier.frontier.refresh import RefreshPlanner
from courtier.frontier.tiers import TierSet
from courtier.store.base import DueUrl, HostTierRecord


def test_expected_gain_is_value_times_change_probability() -> None:
    assert change_probability(1 / DAY, DAY) == pytest.approx(1 - math.exp(-1))
    assert expected_gain_at(3.0, 1 / DAY, DAY) == pytest.approx(3 * (1 - math.exp(-1)))
    assert expected_gain_at(3.0, 0.0, DAY) == 0.0


def test_budget_interval_solves_the_optimality_condition() -> None:
    rate, value, cost = 1 / DAY, 2.0, 0.3 * DAY
    interval = budget_interval(rate, value, cost)
    x = rate * interval
    assert 1 - (1 + x) * math.exp(-x) == pytest.approx(cost * rate / value, rel=1e-6)
    assert budget_interval(rate, 2 * value, cost) < interval   # more value: sooner
    assert budget_interval(rate, value, 2 * cost) > interval   # dearer fetches: later
    assert budget_interval(rate, value, 0.0) == 0.0            # no budget: estimator decides
    assert budget_interval(rate, value, value / rate) == math.inf  # c·r >= v: not worth it


def test_gain_scale_uses_deciles_of_recent_gains() -> None:
    scale = GainScale(window=1000, refresh=100)
    levels = [scale.level(v / 100.0, 1 / DAY, DAY) for v in range(1, 1001)]
    late = [scale.level(v, 1 / DAY, DAY) for v in (0.5, 5.0, 9.5)]
    assert levels[-1] == 9 and late == [0, 4, 9]  # the deciles of 0.006 … 6.3


def test_controller_raises_the_cost_when_planned_load_exceeds_the_target() -> None:
    controller = BudgetController(100, tail_share=0.1)
    start = controller.cost
    controller.replan("default", None, DAY / 500)  # 500 fetches/day planned, target 90
    assert controller.adjust(3 * DAY) == pytest.approx(2 * start)  # at most ×2 in 3 days
    controller.replan("default", DAY / 500, DAY / 10)
    assert controller.adjust(3 * DAY) < 2 * start
    assert BudgetController(None).adjust(DAY) == 0.0


def test_controller_counts_spent_per_tier_in_a_day_window() -> None:
    controller = BudgetController(10)
    for t in (0.0, 10.0, 20.0):
        controller.count_fetch("hot", t)
    controller.count_fetch("hot", DAY + 1)
    assert controller.view()["hot"]["spent"] == 1


def _due(url: str = "http://a.test/p", *, priority: int = 0, depth: int = 1,
         last: float | None = None, due_at: float = 1000.0) -> DueUrl:
    return DueUrl(b"k" * 16, url, "http://a.test", 1, depth, priority, 1, due_at,
                  last_fetch_at=last)


def test_plan_keeps_hot_pages_inside_their_tier_and_stores_a_derived_value() -> None:
    planner = RefreshPlanner(TierSet.from_specs(("hot min=300 max=3600",), DAY), RecrawlPolicy())
    planner.remember({}, {"http://a.test": HostTierRecord("http://a.test", tier="hot")})
    stats = ChangeStats()
    now, plan = 0.0, None
    for _ in range(5):
        plan = planner.schedule(_due(last=None if plan is None else now - 300), Outcome.OK,
                                200, stats, now, changed=True)
        stats = plan.stats
        assert plan.tier == "hot"
        assert plan.next_fetch_at is not None and plan.next_fetch_at - now == 300.0
        now += 300.0
    assert plan is not None and plan.value == pytest.approx(0.8)  # derived, to be stored


def test_plan_uses_a_stored_value_and_leaves_it_alone() -> None:
    planner = RefreshPlanner(TierSet.from_specs(("gold min=600 max=7200 value=10",), DAY),
                             RecrawlPolicy())
    planner.remember({b"k" * 16: 50.0}, {})
    plan = planner.schedule(_due(), Outcome.OK, 200, ChangeStats(), 0.0, changed=True)
    assert plan.tier == "gold" and plan.value is None


def test_non_canonical_copies_wait_longer_and_seeds_keep_their_priority() -> None:
    planner = RefreshPlanner(TierSet.from_specs((), DAY), RecrawlPolicy())
    stats = ChangeStats.from_json(json.loads(json.dumps(
        {"visits": 4, "changes": 2, "interval_sum": 8 * DAY, "last_visit": 0.0})))
    plain = planner.schedule(_due(), Outcome.OK, 200, stats, 2 * DAY, changed=True)
    copy = planner.schedule(_due(), Outcome.OK, 200, stats, 2 * DAY, changed=True,
                            non_canonical=True)
    assert plain.next_fetch_at is not None and copy.next_fetch_at is not None
    assert copy.next_fetch_at - 2 * DAY == pytest.approx(2 * (plain.next_fetch_at - 2 * DAY))
    seed = planner.schedule(_due(priority=10, depth=0), Outcome.OK, 200, stats, 2 * DAY,
                            keep_priority=True)
    assert seed.priority is None


def test_under_a_tight_budget_cheap_pages_stretch_and_valuable_ones_do_not() -> None:
    controller = BudgetController(10)
    controller.cost = 2.0 * DAY
    planner = RefreshPlanner(TierSet.from_specs((), DAY), RecrawlPolicy(), controller)
    stats = ChangeStats(visits=10, changes=5, interval_sum=10 * DAY, last_visit=0.0)
    planner.remember({b"k" * 16: 0.5}, {})
    cheap = planner.schedule(_due(last=0.0), Outcome.OK, 200, stats, DAY, changed=True)
    planner.remember({b"k" * 16: 500.0}, {})
    dear = planner.schedule(_due(last=0.0), Outcome.OK, 200, stats, DAY, changed=True)
    assert cheap.next_fetch_at is not None and dear.next_fetch_at is not None
    assert cheap.next_fetch_at > dear.next_fetch_at
    # stretched, but at most growth_factor (2) times the estimator's interval in one visit
    assert cheap.next_fetch_at - DAY <= 2 * (dear.next_fetch_at - DAY) + 1e-6
