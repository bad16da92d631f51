"""Per-commit refresh planning: value → tier → interval and priority (pure, no I/O).

:class:`RefreshPlanner` ties ``value.py``, ``tiers.py``, ``planner.py`` and the
recrawl estimator together for one worker. The worker tells it the stored values
of the URLs it loaded and the host overrides (:meth:`remember`); the page
pipeline asks it for each commit's ``next_fetch_at`` and ``priority``
(:meth:`schedule`), and the worker runs :meth:`adjust` now and then.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from courtier.core.outcome import Outcome
from courtier.core.records import DueUrl, HostTierRecord
from courtier.frontier.planner import BudgetController, GainScale, budget_interval
from courtier.frontier.recrawl import ChangeStats, RecrawlPolicy, blended_rate, schedule_after
from courtier.frontier.tiers import Tier, TierSet
from courtier.frontier.value import default_value, effective_value

__all__ = ["Plan", "RefreshPlanner"]

#: values and host overrides kept for URLs loaded but not yet committed
MAX_REMEMBERED = 500_000
#: gain deciles below this share priority 0 with new links: refresh priorities are 0 … 5
SHARED_LEVELS = 4
#: a non-canonical copy waits this many times longer than its estimate
NON_CANONICAL_STRETCH = 2.0


@dataclass(frozen=True, slots=True)
class Plan:
    """What one commit writes: schedule, change history, priority, value and tier."""

    next_fetch_at: float | None
    stats: ChangeStats
    priority: int | None      # None keeps the row's priority
    value: float | None       # to store (None: the stored one stays)
    tier: str


class RefreshPlanner:
    def __init__(self, tiers: TierSet, policy: RecrawlPolicy,
                 controller: BudgetController | None = None) -> None:
        self.tiers = tiers
        self.policy = policy
        self.controller = controller or BudgetController(None)
        self._values: dict[bytes, float] = {}
        #: tier name -> (tier, base policy, the tier's policy): made once, not per page
        self._tier_policies: dict[str, tuple[Tier, RecrawlPolicy, RecrawlPolicy]] = {}
        self.hosts: dict[str, HostTierRecord] = {}
        self.scale = GainScale()

    def remember(self, values: Mapping[bytes, float], hosts: Mapping[str, HostTierRecord]) -> None:
        """Stored values of URLs just loaded, and the current overrides of their hosts."""
        if len(self._values) > MAX_REMEMBERED:
            self._values.clear()  # rows loaded long ago fall back to their derived value
        self._values.update(values)
        self.hosts.update(hosts)
        for key in [k for k, h in self.hosts.items() if h.is_empty()]:
            del self.hosts[key]

    def value_of(self, due: DueUrl) -> tuple[float, bool]:
        """(value, stored?): the stored value, else the derived one."""
        stored = self._values.pop(due.url_key, None)
        if stored is not None:
            return stored, True
        host = self.hosts.get(due.host_key)
        factor = 1.0 if host is None or host.value_factor is None else host.value_factor
        return default_value(due.depth, due.priority, host_factor=factor), False

    def tier_policy(self, tier: Tier) -> RecrawlPolicy:
        """``tier.policy(self.policy)``, remembered while the tier and the base policy are
        the same objects (a ``dataclasses.replace`` per page was 0.5 % of a crawl)."""
        base = self.policy
        known = self._tier_policies.get(tier.name)
        if known is not None and known[0] is tier and known[1] is base:
            return known[2]
        policy = tier.policy(base)
        self._tier_policies[tier.name] = (tier, base, policy)
        return policy

    def schedule(self, due: DueUrl, outcome: Outcome, status: int | None, stats: ChangeStats,
                 now: float, *, changed: bool = False, non_canonical: bool = False,
                 keep_priority: bool = False) -> Plan:
        """The plan of one finished fetch (see ``planner.py`` for the formulas).

        ``keep_priority`` (seeds) leaves the row's priority alone; ``non_canonical``
        (a near-duplicate, or rel=canonical naming another URL) plans the URL with a
        lowered value (its stored value is kept) and twice its interval, within the tier.
        """
        value, stored = self.value_of(due)
        tier = self.tiers.assign(due.url, value, self.hosts.get(due.host_key))
        policy = self.tier_policy(tier)
        next_at, stats = schedule_after(outcome, status, stats, policy, now, changed=changed,
                                        sitemap_changefreq=due.sitemap_changefreq,
                                        sitemap_lastmod=due.sitemap_lastmod)
        controller = self.controller
        controller.count_fetch(tier.name, now)
        old = None
        if due.last_fetch_at is not None and due.next_fetch_at > due.last_fetch_at:
            old = due.next_fetch_at - due.last_fetch_at
        priority: int | None = None
        if next_at is not None and outcome in (Outcome.OK, Outcome.NOT_MODIFIED):
            estimate = max(1.0, next_at - now)
            rate = blended_rate(stats, policy, due.sitemap_changefreq, due.sitemap_lastmod, now)
            worth = effective_value(value, non_canonical)
            stretch = budget_interval(rate, worth, controller.cost)
            if stretch > estimate:  # the budget lengthens it, at most growth_factor-fold a visit
                since = now - due.last_fetch_at if due.last_fetch_at is not None else estimate
                stretch = min(stretch, policy.growth_factor * max(estimate, since))
            interval = max(estimate, stretch)
            if non_canonical:  # kept and its links followed, but refreshed less often
                interval *= NON_CANONICAL_STRETCH
            interval = policy.clamp(interval)
            next_at = now + interval
            controller.replan(tier.name, old, interval)
            if not keep_priority:
                # the lower half of the gains shares priority 0 with never-fetched links
                # (first come, first served), so discovery is not starved by refreshes
                priority = max(0, self.scale.level(worth, rate, interval) - SHARED_LEVELS)
        elif next_at is None:
            controller.replan(tier.name, old, None)
        return Plan(next_at, stats, priority, None if stored else value, tier.name)

    def adjust(self, elapsed: float) -> float:
        """One step of the budget controller; returns the new cost per fetch."""
        return self.controller.adjust(elapsed)
