"""The global daily fetch budget, paced through the day.

Every page fetch counts (2xx, 304, errors, retries). The budget is spent as a
token bucket filling at ``budget / 24 h`` with room for one hour's share, so
due URLs queue up and compete: the frontier's best-first order (overdue
guarantee, then the change-rate priority of each URL) decides what the budget
is spent on, instead of whatever happens to become due first after midnight.
Pure: callers pass ``now``. The day's count survives a restart: the worker saves it
(``Store.save_day_counts``) before the counted fetches start and :meth:`restore`s it.
"""

from __future__ import annotations

from courtier.core.records import DAY


class DailyBudget:
    def __init__(self, per_day: int, now: float) -> None:
        if per_day < 1:
            raise ValueError("a daily budget is at least 1 fetch")
        self.per_day = per_day
        self.rate = per_day / DAY
        self.capacity = max(1.0, per_day / 24.0)
        self.tokens = self.capacity
        self.last = now
        self.day_start = now
        self.used = 0

    def restore(self, day_start: float, used: int, now: float) -> None:
        """Continue a window saved by an earlier run (ignored once 24 h have passed):
        fetches it counted are not spent again; the pacing bucket restarts empty."""
        if 0 <= now - day_start < DAY:
            self.day_start, self.used = day_start, max(0, used)
            self.tokens, self.last = 0.0, now

    def _refill(self, now: float) -> None:
        if now - self.day_start >= DAY:
            self.day_start, self.used = now, 0
        self.tokens = min(self.capacity, self.tokens + max(0.0, now - self.last) * self.rate)
        self.last = now

    def allows(self, now: float) -> bool:
        """True when one more fetch may start now."""
        self._refill(now)
        return self.used < self.per_day and self.tokens >= 1.0

    def spend(self, now: float) -> None:
        self._refill(now)
        self.tokens -= 1.0
        self.used += 1

    def spent_for_today(self, now: float) -> bool:
        self._refill(now)
        return self.used >= self.per_day

    def next_allowed(self, now: float) -> float:
        """When the next fetch may start (now if allowed)."""
        self._refill(now)
        if self.used >= self.per_day:
            return self.day_start + DAY
        if self.tokens >= 1.0:
            return now
        return now + (1.0 - self.tokens) / self.rate
