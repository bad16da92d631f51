"""The global daily fetch budget, paced through the day: one worker's part of it.

Every page fetch counts (2xx, 304, errors, retries). The budget is spent as a
token bucket filling at ``budget / 24 h`` with room for one hour's share, so
due URLs queue up and compete: the frontier's best-first order (overdue
guarantee, then the change-rate priority of each URL) decides what the budget
is spent on, instead of whatever happens to become due first after midnight.

**N workers, one budget.** Each worker paces its own bucket, scaled by its
``share`` of the crawl: the shards it holds out of all shards. Its room is one
hour's share times its share (at least one fetch while it holds a shard) and it
fills at its share of the budget's rate. Shards are held by one worker at a time
(leases, epochs and self-fencing see to that), so the shares of a crawl's workers
sum to at most 1 and their buckets together hold at most one hour's share and
fill at the budget's rate: the crawl as a whole never starts more than
``budget / 24 + budget · t / 24 h`` page fetches in any ``t`` seconds, plus at most
one fetch per worker whose share of an hour rounds up to one, plus the write-ahead
lag of a day's beginning (below). No clocks of two machines are compared and
nothing is read from the store to decide.

Shares change with the shards: a bucket's tokens never grow with its share (a
worker that gains shards, by a join, a graceful handover or a takeover, fills
them at the new rate from what it had), and they are cut to the new room when
the share shrinks. So a handover can only leave tokens unspent, never add any;
a worker that crashed took its tokens with it. See docs/scale-out.md ("The
shared daily budget") for why this was chosen over one bucket kept in the store.

The day's count (``used``) is crawl-wide: the worker saves each count in the store
(``Store.reserve_day_counts``, write-ahead) before the counted fetch starts and adopts
the store's higher count from every answer. Its bucket is made once it holds a shard
(``DayLimits.begin``, crawl/day_limits.py): full at its share when the store has no
count of the window, else empty (:meth:`restore`). Read after the gain, a count of 0
means nobody has sent a request of the window; leases other workers issued whose
counts are not in the store yet (the write-ahead lag, at most their fetches in
flight) are the slack. Pure: callers pass ``now`` and the share.
"""

from __future__ import annotations

import math

from courtier.core.records import DAY


class DailyBudget:
    def __init__(self, per_day: int, now: float, share: float = 1.0) -> None:
        if per_day < 1:
            raise ValueError("a daily budget is at least 1 fetch")
        self.per_day = per_day
        #: the crawl's room: one hour's share of the day
        self.hour_share = per_day / 24.0
        #: this worker's part of the crawl (held shards / all shards), 0 to 1
        self.share = _clamp(share)
        self.tokens = self.capacity
        self.last = now
        self.day_start = now
        self.used = 0

    @property
    def capacity(self) -> float:
        """This worker's room: its share of one hour's share, at least one fetch while
        it holds a shard, none while it holds none."""
        if self.share <= 0.0:
            return 0.0
        return max(1.0, self.hour_share * self.share)

    @property
    def rate(self) -> float:
        """Fetches per second this worker's bucket fills at: its share of the budget."""
        return self.per_day * self.share / DAY

    def set_share(self, share: float, now: float) -> None:
        """The worker now holds ``share`` of the shards: the tokens so far filled at the
        old rate; from now on the new rate and room apply, and the tokens are cut to the
        new room (never raised)."""
        share = _clamp(share)
        if share == self.share:
            return
        self._refill(now)
        self.share = share
        self.tokens = min(self.tokens, self.capacity)

    def restore(self, day_start: float, used: int, now: float) -> None:
        """Continue a window saved by an earlier run or by other workers (ignored once
        24 h have passed): fetches it counted are not spent again; the pacing bucket
        restarts empty, since others may have spent the hour's share just now."""
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
        """When the next fetch may start (now if allowed; never while no shard is held)."""
        self._refill(now)
        if self.used >= self.per_day:
            return self.day_start + DAY
        if self.tokens >= 1.0:
            return now
        if self.rate <= 0.0:
            return math.inf
        return now + (1.0 - self.tokens) / self.rate


def _clamp(share: float) -> float:
    return min(1.0, max(0.0, share))
