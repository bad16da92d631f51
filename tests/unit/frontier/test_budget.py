"""The daily budget's pacing bucket (frontier/budget.py): alone, one hour's share of room
filling at budget / 24 h; in a crawl of N workers, each bucket scaled by its share of the
held shards, so that the workers together are paced as one budget through joins,
handovers and takeovers."""

from __future__ import annotations

import math
import random

import pytest

from courtier.core.records import DAY
from courtier.frontier.budget import DailyBudget

T0 = 1_000_000.0
PER_DAY = 720          # one hour's share: 30 fetches; one fetch every 120 s
HOUR_SHARE = PER_DAY / 24
EVERY = DAY / PER_DAY  # seconds between two fetches of the whole crawl, in steady state


def _spend_all(budget: DailyBudget, now: float) -> int:
    """Start every fetch the bucket allows at ``now``; how many."""
    n = 0
    while budget.allows(now):
        budget.spend(now)
        n += 1
    return n


def test_alone_the_bucket_holds_one_hours_share_and_fills_at_the_budgets_rate() -> None:
    budget = DailyBudget(PER_DAY, T0)
    assert _spend_all(budget, T0) == 30
    assert budget.next_allowed(T0) == pytest.approx(T0 + EVERY)
    assert not budget.allows(T0 + EVERY - 1)
    assert _spend_all(budget, T0 + EVERY) == 1
    assert _spend_all(budget, T0 + 10 * DAY / 24) == 30  # room for one hour's share only


def test_two_halves_start_one_hours_share_together_and_fill_at_the_budgets_rate() -> None:
    """Seen red with ``capacity`` and ``rate`` ignoring the share (each worker its own
    whole budget, as before the fix): 60 at the start."""
    a, b = DailyBudget(PER_DAY, T0, 0.5), DailyBudget(PER_DAY, T0, 0.5)
    assert _spend_all(a, T0) + _spend_all(b, T0) == 30
    later = T0 + 4 * EVERY  # four of the crawl's steady-state fetches, two on each
    assert _spend_all(a, later) + _spend_all(b, later) == 4


def test_a_bucket_without_shards_starts_nothing() -> None:
    budget = DailyBudget(PER_DAY, T0, 0.0)
    assert not budget.allows(T0) and not budget.allows(T0 + DAY / 2)
    assert budget.next_allowed(T0 + DAY / 2) == math.inf
    assert not budget.spent_for_today(T0)


def test_a_small_share_still_has_room_for_one_fetch() -> None:
    budget = DailyBudget(PER_DAY, T0, 1 / 256)  # 30/256 of a fetch an hour
    assert budget.capacity == 1.0
    assert _spend_all(budget, T0) == 1
    assert budget.next_allowed(T0) == pytest.approx(T0 + EVERY * 256)


def test_gaining_shards_adds_no_tokens_and_losing_them_cuts_the_room() -> None:
    """Seen red with ``set_share`` filling the bucket to its new room on a gain: a
    newcomer given half the shards starts 15 at once."""
    newcomer = DailyBudget(PER_DAY, T0, 0.0)
    newcomer.set_share(0.5, T0)
    assert not newcomer.allows(T0)
    assert newcomer.next_allowed(T0) == pytest.approx(T0 + 2 * EVERY)  # at half the rate
    leaver = DailyBudget(PER_DAY, T0, 1.0)  # full: 30
    leaver.set_share(0.5, T0)
    assert leaver.tokens == 15.0
    leaver.set_share(1.0, T0)  # back again: still 15, not 30
    assert _spend_all(leaver, T0) == 15


def test_the_tokens_filled_before_a_change_count_at_the_old_rate() -> None:
    budget = DailyBudget(PER_DAY, T0, 0.5)
    _spend_all(budget, T0)
    budget.set_share(1.0, T0 + 2 * EVERY)  # two intervals at half the rate: one token
    assert budget.tokens == pytest.approx(1.0)
    assert budget.next_allowed(T0 + 2 * EVERY) == T0 + 2 * EVERY


def test_a_restored_window_keeps_its_count_and_starts_the_bucket_empty() -> None:
    budget = DailyBudget(PER_DAY, T0 + 60, 0.5)
    budget.restore(T0, 700, T0 + 60)
    assert budget.used == 700 and budget.day_start == T0
    assert not budget.allows(T0 + 60)
    budget.restore(T0 - DAY, 5, T0 + 60)  # a window of yesterday is not continued
    assert budget.used == 700


def test_the_day_count_caps_the_window_and_renews_after_24_hours() -> None:
    budget = DailyBudget(48, T0)
    budget.used = 47
    assert budget.allows(T0)
    budget.spend(T0)
    assert budget.spent_for_today(T0) and not budget.allows(T0 + DAY / 2)
    assert budget.next_allowed(T0 + 1) == T0 + DAY
    assert budget.allows(T0 + DAY) and budget.used == 0


def _worst_window(starts: list[float], span: float) -> int:
    """The most starts in any window of ``span`` seconds (closed at both ends)."""
    ordered = sorted(starts)
    j, worst = 0, 0
    for i, at in enumerate(ordered):
        while ordered[j] < at - span:
            j += 1
        worst = max(worst, i - j + 1)
    return worst


@pytest.mark.parametrize("seed", range(20))
def test_workers_moving_shards_are_paced_as_one_budget(seed: int) -> None:
    """Three greedy workers (each starts whatever its bucket allows, every turn) while
    shards move between them at random: joins, graceful handovers (the leaver's share
    drops before the gainer's rises), crashes (a worker's share and tokens gone, its
    shards taken over later) and restarts (an empty bucket). Their shares never sum past
    1. In every window of the day the crawl starts at most one hour's share plus the
    window's refill, plus one fetch a worker for rounding up a small share.

    Seen red with ``set_share`` filling the bucket to its new room on a gain (all 20
    seeds: up to 77 starts in a window of 60 s, bound 33.5) and with room and rate
    ignoring the share (all 20 seeds: up to 108 starts in an hour, bound 63)."""
    rng = random.Random(seed)
    held = [256, 0, 0]               # shards per worker; a crawl has 256
    free = 0
    buckets = [DailyBudget(PER_DAY, T0, held[i] / 256) for i in range(3)]
    starts: list[float] = []
    now = T0
    while now < T0 + DAY / 4:
        now += rng.choice([0.5, 5.0, 60.0, 600.0])
        move = rng.random()
        if move < 0.3:  # a graceful handover of some shards: release first, then acquire
            giver = rng.randrange(3)
            n = rng.randint(0, held[giver])
            held[giver] -= n
            buckets[giver].set_share(held[giver] / 256, now)
            free += n
        elif move < 0.4:  # a crash: the worker is gone with its tokens; a restart later
            gone = rng.randrange(3)
            free += held[gone]
            held[gone] = 0
            buckets[gone] = DailyBudget(PER_DAY, now, 0.0)
            buckets[gone].restore(now - 1.0, 0, now)
        if free and rng.random() < 0.5:  # free shards (released or expired) acquired
            taker = rng.randrange(3)
            held[taker] += free
            free = 0
            buckets[taker].set_share(held[taker] / 256, now)
        assert sum(held) + free == 256
        for bucket in buckets:
            starts += [now] * _spend_all(bucket, now)
    rounding = 3  # at most one fetch a worker for a share under one fetch an hour
    for span in (0.0, 60.0, 600.0, 3600.0, 4 * 3600.0):
        worst = _worst_window(starts, span)
        assert worst <= HOUR_SHARE + span / EVERY + rounding, (span, worst)
    assert len(starts) > HOUR_SHARE  # the budget was spent, not just held back


def test_the_worst_window_helper_counts_closed_windows() -> None:
    assert _worst_window([0.0, 1.0, 1.0, 3.0], 1.0) == 3
    assert _worst_window([0.0, 2.0], 1.0) == 1
