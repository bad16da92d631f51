"""Recrawl arithmetic: change-rate estimator, intervals, status rules, priorities."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import random

import pytest

from courtier.core.errors import ConfigError
from courtier.core.outcome import Outcome
from courtier.frontier.recrawl import (
    DAY,
    ChangeStats,
    RecrawlPolicy,
    estimate_change_rate,
    next_interval,
    prior_interval,
    record_visit,
    schedule_after,
)

P = RecrawlPolicy()
T0 = 1_700_000_000.0


def _history(policy: RecrawlPolicy, changes: list[bool], gap: float) -> ChangeStats:
    stats = ChangeStats()
    now = T0
    stats = record_visit(stats, False, now, policy)
    for changed in changes:
        now += gap
        stats = record_visit(stats, changed, now, policy)
    return stats


def test_estimator_formula_regular_intervals() -> None:
    # n = 10 visits a day apart, X = 4 changes: r = -ln((10-4+0.5)/(10+0.5)) / 1 day
    stats = ChangeStats(visits=10, changes=4, interval_sum=10 * DAY, last_visit=T0)
    r = estimate_change_rate(stats)
    assert r == pytest.approx(-math.log(6.5 / 10.5) / DAY)


def test_estimator_no_history_and_extremes() -> None:
    assert estimate_change_rate(ChangeStats()) is None
    assert estimate_change_rate(ChangeStats(visits=5, changes=0, interval_sum=5 * DAY)) == 0.0
    always = estimate_change_rate(ChangeStats(visits=5, changes=5, interval_sum=5 * DAY))
    assert always == pytest.approx(math.log(11) / DAY)


def test_estimator_recovers_a_simulated_poisson_rate() -> None:
    rng = random.Random(1)
    rate = 1 / (3 * DAY)
    gap = 2 * DAY
    p_change = 1 - math.exp(-rate * gap)
    changes = [rng.random() < p_change for _ in range(2000)]
    stats = ChangeStats(visits=2000, changes=sum(changes), interval_sum=2000 * gap)
    assert estimate_change_rate(stats) == pytest.approx(rate, rel=0.1)


def test_irregular_intervals_use_the_mean() -> None:
    stats = record_visit(ChangeStats(), False, T0, P)
    stats = record_visit(stats, True, T0 + DAY, P)
    stats = record_visit(stats, False, T0 + 4 * DAY, P)
    assert stats.visits == 2 and stats.changes == 1
    assert stats.mean_interval == pytest.approx(2 * DAY)


def test_first_visit_only_records_time() -> None:
    stats = record_visit(ChangeStats(failures=3, gone=1), True, T0, P)
    assert stats == ChangeStats(last_visit=T0)


def test_visit_in_the_past_is_not_a_comparison() -> None:
    stats = record_visit(ChangeStats(), False, T0, P)
    again = record_visit(stats, True, T0 - 10, P)
    assert again.visits == 0 and again.changes == 0


def test_history_decays_to_the_window() -> None:
    policy = RecrawlPolicy(history_window=10)
    stats = _history(policy, [False] * 30 + [True] * 10, DAY)
    assert stats.visits == 10
    # recent changes dominate: most of the window's weight is the last 10 changed visits
    assert stats.changes > 6
    assert stats.interval_sum == pytest.approx(10 * DAY)


def test_no_history_uses_default_or_sitemap_prior() -> None:
    assert next_interval(ChangeStats(), P) == P.default_interval
    assert next_interval(ChangeStats(), P, sitemap_changefreq="monthly") == 30 * DAY
    assert next_interval(ChangeStats(), P, sitemap_changefreq="Weekly ") == 7 * DAY
    assert next_interval(ChangeStats(), P, sitemap_changefreq="hourly") == P.min_interval
    assert next_interval(ChangeStats(), P, sitemap_changefreq="never") == P.max_interval
    assert next_interval(ChangeStats(), P, sitemap_changefreq="bogus") == P.default_interval
    lastmod = T0 - 3 * DAY
    assert next_interval(ChangeStats(), P, sitemap_lastmod=lastmod, now=T0) == 3 * DAY
    both = prior_interval(P, "monthly", lastmod, T0)
    assert both == 3 * DAY  # the shorter hint wins
    assert prior_interval(P, None, T0 + DAY, T0) == P.default_interval  # future lastmod ignored


def test_frequently_changing_page_converges_to_min_interval() -> None:
    stats = ChangeStats()
    now = T0
    gap = None
    for _ in range(15):
        nxt, stats = schedule_after(Outcome.OK, 200, stats, P, now, changed=True)
        assert nxt is not None
        gap = nxt - now
        now = nxt
    assert gap == P.min_interval


def test_static_page_grows_gradually_to_max_interval() -> None:
    stats = ChangeStats()
    now = T0
    gaps = []
    for _ in range(12):
        nxt, stats = schedule_after(Outcome.NOT_MODIFIED, 304, stats, P, now)
        assert nxt is not None
        gaps.append(nxt - now)
        now = nxt
    assert gaps[0] == P.default_interval
    assert all(b >= a for a, b in itertools.pairwise(gaps))
    assert all(b <= P.growth_factor * a + 1e-6 for a, b in itertools.pairwise(gaps))
    assert gaps[-1] == P.max_interval


def test_prior_fades_as_history_grows() -> None:
    # the sitemap says hourly (→ min 1 day) but the page never changes when visited daily
    # r = (n·0 + w·r0) / (n + w) with r0 = 1/day, w = 2 → interval = (n + w) / w days
    loose = RecrawlPolicy(growth_factor=100.0)
    short = _history(loose, [False] * 2, DAY)
    long = _history(loose, [False] * 15, DAY)
    assert next_interval(short, loose, sitemap_changefreq="hourly") == pytest.approx(2 * DAY)
    assert next_interval(long, loose, sitemap_changefreq="hourly") == pytest.approx(8.5 * DAY)
    # with the default growth factor the long history is capped at 2 × the mean interval
    assert next_interval(long, P, sitemap_changefreq="hourly") == pytest.approx(2 * DAY)


def test_ok_unchanged_and_not_modified_are_both_unchanged_visits() -> None:
    base = record_visit(ChangeStats(), False, T0, P)
    _, a = schedule_after(Outcome.OK, 200, base, P, T0 + DAY, changed=False)
    _, b = schedule_after(Outcome.NOT_MODIFIED, 304, base, P, T0 + DAY, changed=True)
    assert a == b and a.changes == 0 and a.visits == 1


def test_gone_tombstone_then_retired() -> None:
    stats = record_visit(ChangeStats(), False, T0, P)
    nxt, stats = schedule_after(Outcome.GONE, 404, stats, P, T0)
    assert nxt == T0 + P.gone_interval and stats.gone == 1
    nxt, stats = schedule_after(Outcome.GONE, 410, stats, P, T0 + P.gone_interval)
    assert nxt is not None and stats.gone == 2
    nxt, stats = schedule_after(Outcome.GONE, 404, stats, P, T0 + 2 * P.gone_interval)
    assert nxt is None and stats.gone == 3


def test_gone_count_resets_when_page_returns() -> None:
    _, stats = schedule_after(Outcome.GONE, 404, ChangeStats(), P, T0)
    _, stats = schedule_after(Outcome.GONE, 404, stats, P, T0 + 1)
    _, stats = schedule_after(Outcome.OK, 200, stats, P, T0 + 2, changed=True)
    nxt, stats = schedule_after(Outcome.GONE, 404, stats, P, T0 + 3)
    assert nxt is not None and stats.gone == 1


def test_retry_backs_off_exponentially_with_cap() -> None:
    stats = ChangeStats()
    gaps = []
    for _ in range(12):
        nxt, stats = schedule_after(Outcome.RETRY, 503, stats, P, T0)
        assert nxt is not None
        gaps.append(nxt - T0)
    assert gaps[:4] == [60.0, 120.0, 240.0, 480.0]
    assert gaps[-1] == P.retry_cap
    _, stats = schedule_after(Outcome.OK, 200, stats, P, T0)
    assert stats.failures == 0


def test_errors_and_refusals() -> None:
    nxt, s1 = schedule_after(Outcome.HTTP_ERROR, 400, ChangeStats(), P, T0)
    assert nxt == T0 + P.error_interval and s1.errors == 1
    nxt, s2 = schedule_after(Outcome.ERROR, None, s1, P, T0)
    assert nxt == T0 + 2 * P.error_interval and s2.errors == 2
    for _ in range(10):
        nxt, s2 = schedule_after(Outcome.ERROR, None, s2, P, T0)
    assert nxt == T0 + P.max_interval
    for outcome, status in [
        (Outcome.HTTP_ERROR, 403),
        (Outcome.HTTP_ERROR, 401),
        (Outcome.ROBOTS_DENIED, None),
        (Outcome.BLOCKED, None),
    ]:
        nxt, _ = schedule_after(outcome, status, ChangeStats(), P, T0)
        assert nxt == T0 + P.denied_interval
    nxt, _ = schedule_after(Outcome.REDIRECT, 301, ChangeStats(failures=2), P, T0)
    assert nxt == T0 + P.redirect_interval


def test_stats_round_trip_json() -> None:
    stats = _history(P, [True, False, True], DAY)
    stats = schedule_after(Outcome.RETRY, 500, stats, P, T0 + 10 * DAY)[1]
    text = json.dumps(stats.to_json())
    assert ChangeStats.from_json(json.loads(text)) == stats
    assert ChangeStats.from_json({}) == ChangeStats()
    # the hand-built dict has every field, in declaration order, as asdict would
    assert stats.to_json() == dataclasses.asdict(stats)
    assert list(stats.to_json()) == [f.name for f in dataclasses.fields(ChangeStats)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_interval": 0},
        {"min_interval": 10, "default_interval": 5},
        {"max_interval": DAY, "default_interval": 2 * DAY},
        {"gone_retire_after": 0},
        {"retry_base": 0},
        {"growth_factor": 0.5},
        {"prior_weight": -1},
    ],
)
def test_policy_validation(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        RecrawlPolicy(**kwargs)  # type: ignore[arg-type]


def test_refresh_priority_grows_with_the_change_rate() -> None:
    from courtier.frontier.recrawl import MAX_REFRESH_PRIORITY, ChangeStats, refresh_priority

    day = 86_400.0
    assert refresh_priority(ChangeStats()) == 1  # nothing compared yet
    never = ChangeStats(visits=10, changes=0, interval_sum=10 * day)
    monthly = ChangeStats(visits=10, changes=1, interval_sum=10 * 3 * day)
    daily = ChangeStats(visits=10, changes=10, interval_sum=10 * day)
    ranks = [refresh_priority(s) for s in (never, monthly, daily)]
    assert ranks == sorted(ranks) and ranks[0] == 0 and ranks[-1] == MAX_REFRESH_PRIORITY
