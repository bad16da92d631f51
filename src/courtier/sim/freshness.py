"""Freshness under a budget: a web of pages with known change rates and values, refreshed
by one of three policies through the real store refill, judged independently.

The crawl side is courtier's own: a :class:`~courtier.store.memory.MemoryStore`,
its ``load_due`` refill (which does the choosing), ``commit``, the values imported
with ``set_values`` and read back by :func:`courtier.crawl.planning.prepare`, and, for the
``planner`` policy, :class:`~courtier.frontier.refresh.RefreshPlanner` with its budget
controller. Only HTTP is left out: a fetch of page *i* at time *t* reports
"changed" when the page's hidden Poisson process changed since the previous
fetch, which is what a digest comparison or a 304 tells the real crawl.

The judge (:class:`FreshnessJudge`) knows each page's true change times and
integrates, over the measured window, the value whose stored copy is current.
Policies:

* ``planner``: expected gain and the budget controller (docs/freshness.md §3);
* ``change-rate``: the crawl before the planner — the change-rate estimator under the
  default recrawl policy, ranked by change rate (``refresh_priority``);
* ``round-robin``: every page every ``pages / budget`` days, in turn.

Every policy gets the same budget per tick and the same refill.
:func:`run_frontier_freshness` puts the frontier between the refill and the fetches (the
planner policy, the ready hosts' order strict or with priority turns).
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass, field

from courtier.core.clock import VirtualClock
from courtier.core.outcome import Outcome
from courtier.core.records import OVERDUE_AFTER, HostRecord
from courtier.core.urls import SHARD_COUNT, canonicalize
from courtier.crawl import planning
from courtier.frontier.lease import FetchFeedback, LeaseKind
from courtier.frontier.planner import BudgetController
from courtier.frontier.recrawl import (
    DAY,
    ChangeStats,
    RecrawlPolicy,
    refresh_priority,
    schedule_after,
)
from courtier.frontier.refresh import RefreshPlanner
from courtier.frontier.scheduler import Frontier
from courtier.frontier.tiers import TierSet
from courtier.store.base import DueUrl, FetchCommit, NewUrl
from courtier.store.memory import MemoryStore

POLICIES = ("planner", "change-rate", "round-robin")
T0 = 1_700_000_000.0


@dataclass(frozen=True, slots=True)
class FreshPage:
    url: str
    rate: float    # true changes per second (Poisson)
    value: float   # true value (imported into the store, as a search engine would)
    changefreq: str | None = None  # the sitemap hint the crawl is given (None: no hint)


#: sitemap <changefreq> buckets: the hint of a page is the bucket nearest its true interval
_BUCKETS = (("hourly", 3600.0), ("daily", DAY), ("weekly", 7 * DAY), ("monthly", 30 * DAY),
            ("yearly", 365 * DAY))


def changefreq_of(interval: float) -> str:
    return min(_BUCKETS, key=lambda b: abs(math.log(b[1] / interval)))[0]


def make_pages(count: int, seed: int = 7, hosts: int = 500,
               hinted: float = 0.5) -> list[FreshPage]:
    """``count`` pages: change intervals log-uniform from 1 h to 90 days, values
    log-normal (σ = 1.2, a heavy tail), independent of each other; a ``hinted`` share
    carries a sitemap ``changefreq`` (the bucket nearest the true interval)."""
    rng = random.Random(seed)
    low, high = math.log(3600.0), math.log(90 * DAY)
    pages = []
    for i in range(count):
        interval = math.exp(rng.uniform(low, high))
        value = rng.lognormvariate(0.0, 1.2)
        hint = changefreq_of(interval) if rng.random() < hinted else None
        pages.append(FreshPage(f"http://h{i % hosts}.fresh.sim/p/{i}", 1.0 / interval, value,
                               hint))
    return pages


@dataclass(slots=True)
class FreshnessJudge:
    """True change times and the value-weighted freshness integral over ``[start, end)``."""

    pages: list[FreshPage]
    start: float
    end: float
    rng: random.Random = field(default_factory=lambda: random.Random(11))
    next_change: list[float] = field(default_factory=list)
    last_fetch: list[float | None] = field(default_factory=list)
    fresh_value_seconds: float = 0.0

    def __post_init__(self) -> None:
        self.next_change = [T0 + self.rng.expovariate(p.rate) for p in self.pages]
        self.last_fetch = [None] * len(self.pages)

    def _credit(self, i: int, until: float) -> None:
        last = self.last_fetch[i]
        if last is None:
            return
        low, high = max(last, self.start), min(self.next_change[i], until, self.end)
        if high > low:
            self.fresh_value_seconds += self.pages[i].value * (high - low)

    def fetch(self, i: int, now: float) -> bool:
        """Page ``i`` is fetched at ``now``: did it change since the last fetch?"""
        self._credit(i, now)
        changed = self.last_fetch[i] is None or self.next_change[i] <= now
        if self.next_change[i] <= now:  # memoryless: the next change after this copy
            self.next_change[i] = now + self.rng.expovariate(self.pages[i].rate)
        self.last_fetch[i] = now
        return changed

    def value_weighted_freshness(self) -> float:
        for i in range(len(self.pages)):
            self._credit(i, self.end)
            self.last_fetch[i] = None
        total = sum(p.value for p in self.pages) * (self.end - self.start)
        return self.fresh_value_seconds / total if total > 0 else 0.0


@dataclass(frozen=True, slots=True)
class FreshnessResult:
    policy: str
    value_weighted_freshness: float
    fetches: int
    max_fetches_per_day: int


def _policy_commit(policy: str, due: DueUrl, changed: bool, now: float,
                   stats: ChangeStats, planner: RefreshPlanner, recrawl: RecrawlPolicy,
                   cycle: float) -> tuple[FetchCommit, ChangeStats]:
    outcome = Outcome.OK if changed else Outcome.NOT_MODIFIED
    value = tier = None
    if policy == "planner":
        plan = planner.schedule(due, outcome, 200 if changed else 304, stats, now,
                                changed=changed)
        next_at, stats, priority, value, tier = (plan.next_fetch_at, plan.stats, plan.priority,
                                                 plan.value, plan.tier)
    elif policy == "change-rate":
        next_at, stats = schedule_after(outcome, 200, stats, recrawl, now, changed=changed,
                                        sitemap_changefreq=due.sitemap_changefreq)
        priority = refresh_priority(stats)
    else:
        next_at, priority = now + cycle, 0
    commit = FetchCommit(url_key=due.url_key, url=due.url, host_key=due.host_key,
                         shard=due.shard, version=due.version, epoch=1, outcome=outcome,
                         fetched_at=now, next_fetch_at=next_at, status=200 if changed else 304,
                         priority=priority, value=value, tier=tier)
    return commit, stats


@dataclass(slots=True)
class _Setup:
    clock: VirtualClock
    store: MemoryStore
    index: dict[bytes, int]
    shards: list[int]
    recrawl: RecrawlPolicy
    planner: RefreshPlanner
    judge: FreshnessJudge


async def _set_up(pages: list[FreshPage], days: float, budget: int,
                  warmup_days: float) -> _Setup:
    """The store with every page QUEUED and its value imported, the planner, the judge."""
    clock = VirtualClock(T0)
    store = MemoryStore(clock)
    await store.open()
    index: dict[bytes, int] = {}
    rows = []
    for i, page in enumerate(pages):
        canon = canonicalize(page.url)
        index[canon.url_key] = i
        rows.append(NewUrl(canon.url_key, canon.url, canon.host_key, canon.shard, 1, 0, T0, T0,
                           sitemap_changefreq=page.changefreq))
    await store.add_urls(rows)
    await store.set_values([(row.url_key, pages[index[row.url_key]].value) for row in rows])
    shards = list(range(SHARD_COUNT))
    await store.acquire_shards("sim", shards, T0, 10 * days * DAY)
    recrawl = RecrawlPolicy()
    planner = RefreshPlanner(TierSet.from_specs([], DAY), recrawl,
                             BudgetController(budget, tail_share=0.05))
    judge = FreshnessJudge(pages, T0 + warmup_days * DAY, T0 + days * DAY)
    return _Setup(clock, store, index, shards, recrawl, planner, judge)


async def _run(pages: list[FreshPage], policy: str, days: float, budget: int,
               warmup_days: float, tick: float) -> FreshnessResult:
    setup = await _set_up(pages, days, budget, warmup_days)
    store, judge, planner = setup.store, setup.judge, setup.planner
    stats: dict[bytes, ChangeStats] = {}
    cycle = len(pages) / budget * DAY
    per_tick = budget * tick / DAY
    carry, fetches, per_day = 0.0, 0, [0] * (int(days) + 1)
    now = T0
    while now < judge.end:
        carry += per_tick
        want = int(carry)
        carry -= want
        due = await store.load_due(setup.shards, now, want, want) if want else []
        if policy == "planner":
            await planning.prepare(store, planner, due)
        commits = []
        for row in due:
            changed = judge.fetch(setup.index[row.url_key], now)
            commit, stats[row.url_key] = _policy_commit(
                policy, row, changed, now, stats.get(row.url_key, ChangeStats()), planner,
                setup.recrawl, cycle)
            commits.append(commit)
        await store.commit(commits)
        fetches += len(due)
        per_day[int((now - T0) // DAY)] += len(due)
        if policy == "planner":
            planner.adjust(tick)
        now += tick
        setup.clock.set(now)
    return FreshnessResult(policy, judge.value_weighted_freshness(), fetches, max(per_day))


@dataclass(frozen=True, slots=True)
class FrontierFreshnessResult:
    """:class:`FreshnessResult` of the planner through the frontier, and the longest
    wait, in grants, of a host with URLs in memory: from the grant that found it queued
    (or its previous one) to its own; hosts that had URLs in memory and never a grant."""

    freshness: FreshnessResult
    longest_wait_grants: int
    hosts_never_served: int
    longest_wait_by_priority: dict[int, int]  # by the priority of the URL granted
    overdue_grants: int  # grants of URLs overdue by OVERDUE_AFTER (they outrank all else)


async def _run_through_frontier(pages: list[FreshPage], turn_every: int | None, days: float,
                                budget: int, warmup_days: float, tick: float,
                                window: int) -> FrontierFreshnessResult:
    setup = await _set_up(pages, days, budget, warmup_days)
    store, judge, planner, clock = setup.store, setup.judge, setup.planner, setup.clock
    frontier = Frontier(clock, "courtier", turn_every=turn_every)
    stats: dict[bytes, ChangeStats] = {}
    per_tick = budget * tick / DAY
    carry, fetches, per_day = 0.0, 0, [0] * (int(days) + 1)
    grants = 0
    queued_since: dict[str, int] = {}  # host -> the grant count when it was last served
    longest = 0
    served: set[str] = set()
    by_priority: dict[int, int] = {}
    overdue = 0
    now = T0
    while now < judge.end:
        room = window - frontier.queued
        if room >= window // 2:  # the worker's refill rule (crawl/refiller.py)
            due = await store.load_due(setup.shards, now, room, 64,
                                       skip_hosts=frontier.full_hosts(32))
            await planning.prepare(store, planner, due)
            for row in due:
                if not frontier.knows_host(row.host_key):
                    frontier.register_host(row.host_key, row.shard, HostRecord(
                        row.host_key, row.shard, robots_status=404, robots_fetched_at=T0,
                        robots_expires_at=T0 + 10 * days * DAY))  # no robots.txt: allowed
                queued_since.setdefault(row.host_key, grants)
            frontier.add(due)
        frontier.rerank()
        carry += per_tick
        want = int(carry)
        carry -= want
        commits = []
        while want > 0:
            lease = frontier.next_lease() or frontier.next_lease()  # a new turn once
            if lease is None:
                break
            leased = lease.due
            assert leased is not None and lease.kind is LeaseKind.PAGE
            grants += 1
            wait = grants - queued_since.pop(lease.host_key, grants)
            longest = max(longest, wait)
            by_priority[leased.priority] = max(by_priority.get(leased.priority, 0), wait)
            overdue += leased.next_fetch_at < now - OVERDUE_AFTER
            served.add(lease.host_key)
            changed = judge.fetch(setup.index[leased.url_key], now)
            commit, stats[leased.url_key] = _policy_commit(
                "planner", leased, changed, now, stats.get(leased.url_key, ChangeStats()),
                planner, setup.recrawl, 0.0)
            commits.append(commit)
            frontier.finish_page(lease, FetchFeedback(200 if changed else 304, 0.1))
            if frontier.hosts[lease.host_key].queue:
                queued_since[lease.host_key] = grants
            want -= 1
        await store.commit(commits)
        fetches += len(commits)
        per_day[int((now - T0) // DAY)] += len(commits)
        planner.adjust(tick)
        now += tick
        clock.set(now)
    freshness = FreshnessResult("planner", judge.value_weighted_freshness(), fetches,
                                max(per_day))
    return FrontierFreshnessResult(freshness, longest, len(frontier.hosts) - len(served),
                                   dict(sorted(by_priority.items())), overdue)


def run_freshness(pages: list[FreshPage], policy: str, *, days: float = 30.0,
                  budget: int | None = None, warmup_days: float = 15.0,
                  tick: float = 900.0) -> FreshnessResult:
    """One policy over ``days`` (budget: 10 % of the pages a day unless given); the
    value-weighted freshness is averaged over the days after ``warmup_days``."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, not {policy!r}")
    daily = budget if budget is not None else max(1, len(pages) // 10)
    return asyncio.run(_run(pages, policy, days, daily, warmup_days, tick))


def run_frontier_freshness(pages: list[FreshPage], turn_every: int | None, *,
                           days: float = 30.0, budget: int | None = None,
                           warmup_days: float = 15.0, tick: float = 900.0,
                           window: int = 20_000) -> FrontierFreshnessResult:
    """The ``planner`` policy with the frontier between the refill and the fetches, as
    in the worker: the refill loads up to ``window`` due rows into a
    :class:`~courtier.frontier.scheduler.Frontier` (ready hosts ordered with a turn in
    every ``turn_every`` for the lower priorities, None: strict priority) and the budget
    takes its leases one by one, so the frontier's ready order decides what is fetched."""
    daily = budget if budget is not None else max(1, len(pages) // 10)
    return asyncio.run(_run_through_frontier(pages, turn_every, days, daily, warmup_days,
                                             tick, window))
