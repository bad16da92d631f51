"""Recrawl policy: when to fetch a URL again, from its change history and its last outcome.

Pure arithmetic: no clock reads, no I/O. Callers pass ``now`` (seconds, the
same clock as ``next_fetch_at``). ``docs/freshness.md`` explains the model
with its formulas; in short:

* Each successful visit (200 or 304) after the first is a *comparison*: the
  page changed since the previous visit or it did not (the caller decides,
  e.g. by payload digest or SimHash; a 304 is "unchanged").
  :class:`ChangeStats` keeps ``n`` comparisons, ``X`` detected changes and
  the sum of the compared intervals, decayed to a window of recent visits.
* The change rate is Cho & Garcia-Molina's improved estimator for a
  Poisson process observed at intervals ``I``:
  ``r̂ = −ln((n − X + 0.5) / (n + 0.5)) / I``. Irregular intervals use their
  mean ``I = ΣIᵢ / n`` (exact for regular intervals; the iterative MLE for
  irregular ones would need every interval, and the state must stay O(1)).
* A prior rate (sitemap ``changefreq``/``lastmod``, else the default
  interval) is blended in as ``prior_weight`` pseudo-visits, so the prior
  rules while history is short and fades as it grows.
* The interval is ``change_factor / r``, at most ``growth_factor`` × the
  mean observed interval, clamped to ``[min_interval, max_interval]``.
* Failures follow status rules (:func:`schedule_after`): 404/410 leave a
  tombstone re-checked after ``gone_interval`` and retired after
  ``gone_retire_after`` consecutive confirmations; retries back off
  exponentially up to ``retry_cap``; final errors back off from
  ``error_interval`` up to ``max_interval``.

Budgets: :func:`plan_refresh` picks the day's refreshes under a fetch
budget; :func:`refresh_load` converts intervals into fetches per day. Both
live in :mod:`courtier.frontier.refresh_budget` and are re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from courtier.core.errors import ConfigError
from courtier.core.outcome import Outcome
from courtier.frontier.refresh_budget import (
    RefreshCandidate,
    expected_gain,
    plan_refresh,
    refresh_load,
)

__all__ = [
    "CHANGEFREQ_SECONDS",
    "DAY",
    "ChangeStats",
    "RecrawlPolicy",
    "RefreshCandidate",
    "blended_rate",
    "estimate_change_rate",
    "expected_gain",
    "next_interval",
    "plan_refresh",
    "prior_interval",
    "record_visit",
    "refresh_load",
    "schedule_after",
]

DAY = 86_400.0

#: sitemap <changefreq> values as intervals (before clamping to the policy's bounds)
CHANGEFREQ_SECONDS: Mapping[str, float] = {
    "always": 0.0,
    "hourly": 3_600.0,
    "daily": DAY,
    "weekly": 7 * DAY,
    "monthly": 30 * DAY,
    "yearly": 365 * DAY,
    "never": math.inf,
}

#: HTTP_ERROR statuses that mean "access refused" (re-checked at denied_interval, no back-off)
_ACCESS_REFUSED = frozenset({401, 403, 407, 451})


@dataclass(frozen=True, slots=True)
class RecrawlPolicy:
    """Crawl-wide recrawl settings (seconds unless noted).

    Raises :class:`~courtier.core.errors.ConfigError` when the bounds are not
    ``0 < min_interval <= default_interval <= max_interval`` or another
    value is out of range.
    """

    min_interval: float = DAY  # never recrawl a page more often
    max_interval: float = 30 * DAY  # never wait longer between recrawls of a live page
    default_interval: float = 7 * DAY  # prior when neither history nor sitemap says more
    prior_weight: float = 2.0  # how many compared visits the prior is worth
    change_factor: float = 1.0  # interval = change_factor / change rate
    growth_factor: float = 2.0  # next interval <= growth_factor × mean observed interval
    history_window: float = 20.0  # comparisons kept (older ones decay proportionally)
    gone_interval: float = 14 * DAY  # re-check of a 404/410 tombstone
    gone_retire_after: int = 3  # consecutive 404/410 answers that retire the URL
    retry_base: float = 60.0  # first retry after 429/5xx/network error
    retry_cap: float = 6 * 3_600.0  # retries never wait longer
    error_interval: float = DAY  # first re-check after a final error (doubles, up to max)
    redirect_interval: float = 30 * DAY  # re-check of a URL that redirected
    denied_interval: float = 7 * DAY  # robots-denied, blocked, 401/403/407/451

    def __post_init__(self) -> None:
        if not 0 < self.min_interval <= self.default_interval <= self.max_interval:
            raise ConfigError(
                "recrawl intervals must satisfy 0 < min <= default <= max, got "
                f"{self.min_interval}, {self.default_interval}, {self.max_interval}"
            )
        positive = {
            "gone_interval": self.gone_interval,
            "retry_base": self.retry_base,
            "retry_cap": self.retry_cap,
            "error_interval": self.error_interval,
            "redirect_interval": self.redirect_interval,
            "denied_interval": self.denied_interval,
            "change_factor": self.change_factor,
            "history_window": self.history_window,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ConfigError(f"recrawl {name} must be positive, got {value}")
        if self.prior_weight < 0 or self.growth_factor < 1:
            raise ConfigError("recrawl prior_weight must be >= 0 and growth_factor >= 1")
        if self.gone_retire_after < 1:
            raise ConfigError(f"gone_retire_after must be >= 1, got {self.gone_retire_after}")

    def clamp(self, interval: float) -> float:
        """``interval`` limited to ``[min_interval, max_interval]`` (NaN gives the default)."""
        if math.isnan(interval):
            return self.default_interval
        return min(self.max_interval, max(self.min_interval, interval))


@dataclass(frozen=True, slots=True)
class ChangeStats:
    """Compact per-URL change history (a few numbers; JSON or columns).

    ``visits`` (n) and ``changes`` (X) count compared visits and detected
    changes, ``interval_sum`` the seconds between compared visits; all three
    are floats because they decay once ``n`` exceeds the window.
    ``last_visit`` is the time of the last 200/304; the three counters
    count consecutive retries, 404/410 answers and final errors.
    """

    visits: float = 0.0
    changes: float = 0.0
    interval_sum: float = 0.0
    last_visit: float | None = None
    failures: int = 0
    gone: int = 0
    errors: int = 0

    @property
    def mean_interval(self) -> float | None:
        """Mean seconds between compared visits (None without history)."""
        if self.visits <= 0 or self.interval_sum <= 0:
            return None
        return self.interval_sum / self.visits

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict; :meth:`from_json` reads it back (``asdict``'s result,
        built directly: this runs once per fetch and ``asdict`` deep-copies)."""
        return {"visits": self.visits, "changes": self.changes,
                "interval_sum": self.interval_sum, "last_visit": self.last_visit,
                "failures": self.failures, "gone": self.gone, "errors": self.errors}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChangeStats:
        """Rebuild from :meth:`to_json` output; unknown keys are ignored, missing ones default."""
        last = data.get("last_visit")
        return cls(
            visits=float(data.get("visits", 0.0)),
            changes=float(data.get("changes", 0.0)),
            interval_sum=float(data.get("interval_sum", 0.0)),
            last_visit=None if last is None else float(last),
            failures=int(data.get("failures", 0)),
            gone=int(data.get("gone", 0)),
            errors=int(data.get("errors", 0)),
        )


def estimate_change_rate(stats: ChangeStats) -> float | None:
    """Cho & Garcia-Molina's improved Poisson change-rate estimate, in changes per second.

    ``r̂ = −ln((n − X + 0.5) / (n + 0.5)) / I`` with ``I`` the mean compared
    interval. None when there is no compared visit yet.
    """
    interval = stats.mean_interval
    if interval is None:
        return None
    n = stats.visits
    x = min(max(stats.changes, 0.0), n)
    return -math.log((n - x + 0.5) / (n + 0.5)) / interval


def record_visit(
    stats: ChangeStats, changed: bool, now: float, policy: RecrawlPolicy
) -> ChangeStats:
    """Add one successful visit at ``now``; ``changed`` compares it with the previous one.

    The first visit (no ``last_visit``) only records the time. A visit at or
    before ``last_visit`` (clock skew, replays) is not a comparison. Once
    ``visits`` exceeds ``history_window`` the three sums are scaled down to
    the window, so old behaviour fades. Failure counters are reset.
    """
    visits, changes, total = stats.visits, stats.changes, stats.interval_sum
    if stats.last_visit is not None and now > stats.last_visit:
        visits += 1.0
        changes += 1.0 if changed else 0.0
        total += now - stats.last_visit
        if visits > policy.history_window:
            scale = policy.history_window / visits
            visits, changes, total = policy.history_window, changes * scale, total * scale
    return ChangeStats(visits, changes, total, now, 0, 0, 0)


def prior_interval(
    policy: RecrawlPolicy,
    sitemap_changefreq: str | None = None,
    sitemap_lastmod: float | None = None,
    now: float | None = None,
) -> float:
    """The interval believed before any history: sitemap hints, else ``default_interval``.

    ``changefreq`` maps through :data:`CHANGEFREQ_SECONDS` (unknown values
    are ignored); ``lastmod`` (needs ``now``) suggests the page's age
    ``now − lastmod``. With both, the shorter wins. Clamped to the policy.
    """
    hints: list[float] = []
    if sitemap_changefreq is not None:
        freq = CHANGEFREQ_SECONDS.get(sitemap_changefreq.strip().lower())
        if freq is not None:
            hints.append(freq)
    if sitemap_lastmod is not None and now is not None and sitemap_lastmod <= now:
        hints.append(now - sitemap_lastmod)
    return policy.clamp(min(hints) if hints else policy.default_interval)


def blended_rate(
    stats: ChangeStats,
    policy: RecrawlPolicy,
    sitemap_changefreq: str | None = None,
    sitemap_lastmod: float | None = None,
    now: float | None = None,
) -> float:
    """Changes per second believed: ``r = (n·r̂ + w·r₀) / (n + w)`` with the prior rate
    ``r₀ = change_factor / prior`` and ``w = prior_weight`` (just ``r₀`` without history)."""
    prior = prior_interval(policy, sitemap_changefreq, sitemap_lastmod, now)
    prior_rate = policy.change_factor / prior
    estimate = estimate_change_rate(stats)
    if estimate is None:
        return prior_rate
    n, w = stats.visits, policy.prior_weight
    return (n * estimate + w * prior_rate) / (n + w)


def next_interval(
    stats: ChangeStats,
    policy: RecrawlPolicy,
    sitemap_changefreq: str | None = None,
    sitemap_lastmod: float | None = None,
    now: float | None = None,
) -> float:
    """Seconds until the next visit of a live page, from history blended with the prior.

    ``r`` from :func:`blended_rate`; the interval ``change_factor / r`` is capped at
    ``growth_factor`` × the mean observed interval and clamped to
    ``[min_interval, max_interval]``. Without history it is the prior interval.
    """
    if estimate_change_rate(stats) is None:
        return prior_interval(policy, sitemap_changefreq, sitemap_lastmod, now)
    rate = blended_rate(stats, policy, sitemap_changefreq, sitemap_lastmod, now)
    interval = policy.change_factor / rate if rate > 0 else math.inf
    mean = stats.mean_interval
    if mean is not None:
        interval = min(interval, policy.growth_factor * mean)
    return policy.clamp(interval)


def schedule_after(
    outcome: Outcome,
    status: int | None,
    stats: ChangeStats,
    policy: RecrawlPolicy,
    now: float,
    *,
    changed: bool = False,
    sitemap_changefreq: str | None = None,
    sitemap_lastmod: float | None = None,
) -> tuple[float | None, ChangeStats]:
    """The next ``next_fetch_at`` (absolute; None retires the URL) and the updated stats.

    * OK: a visit, ``changed`` as the caller determined; NOT_MODIFIED: an
      unchanged visit. Both schedule :func:`next_interval`.
    * GONE: a tombstone re-checked after ``gone_interval``; retired (None)
      at the ``gone_retire_after``-th consecutive GONE.
    * RETRY: ``min(retry_cap, retry_base · 2^(k−1))`` for the k-th
      consecutive retry (the caller decides when retries turn into ERROR).
    * HTTP_ERROR with 401/403/407/451, ROBOTS_DENIED, BLOCKED:
      ``denied_interval``. Other HTTP_ERROR and ERROR:
      ``min(max_interval, error_interval · 2^(k−1))`` for the k-th in a row.
    * REDIRECT: ``redirect_interval`` (the target is crawled as its own URL).
    * NOT_HTML (a type not asked for, not downloaded): ``max_interval``.
    """
    if outcome in (Outcome.OK, Outcome.NOT_MODIFIED):
        visited = record_visit(stats, outcome is Outcome.OK and changed, now, policy)
        gap = next_interval(visited, policy, sitemap_changefreq, sitemap_lastmod, now)
        return now + gap, visited
    if outcome is Outcome.GONE:
        gone = stats.gone + 1
        after = replace(stats, gone=gone, failures=0, errors=0)
        if gone >= policy.gone_retire_after:
            return None, after
        return now + policy.gone_interval, after
    if outcome is Outcome.RETRY:
        failures = stats.failures + 1
        gap = min(policy.retry_cap, policy.retry_base * 2.0 ** min(failures - 1, 60))
        return now + gap, replace(stats, failures=failures)
    if outcome is Outcome.NOT_HTML:
        return now + policy.max_interval, replace(stats, failures=0, gone=0, errors=0)
    if outcome is Outcome.REDIRECT:
        return now + policy.redirect_interval, replace(stats, failures=0, gone=0, errors=0)
    refused = outcome is Outcome.HTTP_ERROR and status in _ACCESS_REFUSED
    if refused or outcome in (Outcome.ROBOTS_DENIED, Outcome.BLOCKED):
        return now + policy.denied_interval, replace(stats, failures=0, gone=0)
    # HTTP_ERROR (other 4xx) and ERROR (gave up after retries)
    errors = stats.errors + 1
    gap = min(policy.max_interval, policy.error_interval * 2.0 ** min(errors - 1, 60))
    return now + gap, replace(stats, failures=0, gone=0, errors=errors)


#: highest priority a recrawl earns from its change rate (seeds are 10, links 0)
MAX_REFRESH_PRIORITY = 5


def refresh_priority(stats: ChangeStats) -> int:
    """Recrawl priority from the change rate: 0 (never seen to change) … 5 (daily or
    faster); 1 while there is no compared visit yet. When the daily budget is short,
    the frontier's best-first order spends it on the pages likeliest to have changed."""
    rate = estimate_change_rate(stats)
    if rate is None:
        return 1
    if stats.changes >= stats.visits > 0:
        # changed at every visit: the estimate is only a lower bound (the page may change
        # far faster than we look); rank it first rather than let a slow look-back lower it
        return MAX_REFRESH_PRIORITY
    per_month = rate * 30 * DAY
    return max(0, min(MAX_REFRESH_PRIORITY, int(math.log2(1.0 + per_month))))
