"""When the loop stops and how long it sleeps, as a mixin of :class:`~courtier.worker.Worker`:
the stop rules (``--max-pages``, ``--max-seconds``), the end of a one-shot crawl
(nothing due now, no unfinished cycle within ``--linger``; with many workers, none of
them holding a URL), the wait between turns, and the live figures (:class:`CrawlStatus`)
handed to the progress display.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from courtier.clock import Clock
from courtier.cluster.coordinator import ShardCoordinator
from courtier.cluster.shard_state import ShardStateKeeper
from courtier.config import CrawlConfig
from courtier.errors import StoreError
from courtier.frontier.scheduler import Frontier
from courtier.metrics import CrawlMetrics
from courtier.process import PageProcessor
from courtier.progress_text import waiting_text
from courtier.store.base import FetchCommit, Store
from courtier.urls import SHARD_COUNT
from courtier.worker_refill import REFILL_EVERY

COMMIT_EVERY = 0.5       # seconds: discovered URLs are durable within about this
MIN_WAIT = 0.001         # never spin: a host that is "ready" but cannot start waits a little
IDLE_POLL = 5.0          # longest sleep while waiting for retries (new seeds wait at most this)
REPORT_EVERY = 0.25      # seconds between progress figure updates
CLUSTER_DONE_POLL = 1.0  # seconds between "is the whole crawl done?" looks of an idle worker
#: an idle worker's look for the crawl's end spends at most about this share of its idle
#: time in the store: after a look that took t seconds the next one waits t / share.
#: The look scans rows (docs/design.md, "Known limits"): ~6-11 s on a 10 M-URL store
END_CHECK_SHARE = 0.1


@dataclass(slots=True)
class CrawlStatus:
    """Live figures for the progress display and the final summary."""

    started_at: float = 0.0
    now: float = 0.0
    pages: int = 0
    fetched: int = 0
    errors: int = 0
    denied: int = 0
    bytes: int = 0
    queued: int = 0
    in_flight: int = 0
    hosts_active: int = 0
    discovered: int = 0
    stale_commits: int = 0
    left_for_later: bool = False   # unfinished retries remain beyond --linger
    longest_stall: float = 0.0     # seconds: the event loop's longest lag (loopwatch.py)
    waiting: str = ""              # what a lingering one-shot crawl waits for (progress.py)
    #: URLs of an unfinished cycle left in the store when it ended (recrawls not counted)
    left_unfetched: int | None = None   # never fetched
    left_retrying: int | None = None    # retrying after a failure
    stop_reason: str = ""
    warc_files: list[str] = field(default_factory=list)

    @property
    def pages_per_second(self) -> float:
        elapsed = self.now - self.started_at
        return self.fetched / elapsed if elapsed > 0 else 0.0


class PacingSteps:
    """The loop's stop rules, end and waits; the attributes are the worker's."""

    config: CrawlConfig
    store: Store
    frontier: Frontier
    processor: PageProcessor
    metrics: CrawlMetrics
    shards: list[int]
    coordinator: ShardCoordinator | None
    shard_state: ShardStateKeeper | None
    status: CrawlStatus
    on_progress: Callable[[CrawlStatus], None] | None
    #: longest idle sleep; bounds how late work added from outside is noticed
    idle_poll: float
    _tasks: set[asyncio.Task[None]]
    clock: Clock
    #: no look for the crawl's end before this time (END_CHECK_SHARE)
    _end_check_after: float
    _pending: list[FetchCommit]
    _draining: dict[int, float]
    _stop: asyncio.Event
    _wakeup: asyncio.Event
    _idle_until: float | None
    _budget_spent_until: float | None
    _last_report: float
    _pages_issued: int

    if TYPE_CHECKING:  # the worker's (worker.py, worker_commit.py); no stub may shadow them
        def request_stop(self, reason: str = "stopped") -> None: ...

        def _cancel_in_flight(self) -> None: ...

        def may_issue(self, now: float) -> bool: ...

    def _check_limits(self, now: float, start: float) -> None:
        config = self.config
        if config.max_pages is not None and self._pages_issued >= config.max_pages:
            self.request_stop("max pages")
        elif config.max_seconds is not None and now - start >= config.max_seconds:
            # a bound, not a wish: fetches in flight are cancelled and their URLs released
            self.request_stop("max seconds")
            self._cancel_in_flight()

    async def _nothing_due(self, now: float) -> bool:
        """:meth:`_nothing_due_now`, at most about ``END_CHECK_SHARE`` of the idle time:
        after a look that took t seconds, False without a look for t / share seconds (the
        crawl's end is noticed that much later; work that turns up is refilled as ever)."""
        if now < self._end_check_after:
            return False
        started = self.clock.now()
        done = await self._nothing_due_now(now)
        self._end_check_after = started + (self.clock.now() - started) / END_CHECK_SHARE
        return done

    async def _nothing_due_now(self, now: float) -> bool:
        """A one-shot crawl ends when nothing is due now and no unfinished fetch cycle
        (a retry, a host in back-off or with robots.txt unreachable) is due within
        ``--linger`` seconds; later ones stay queued for the next run. Recrawls are
        never waited for."""
        if self.shard_state is not None and self.shard_state.rebuilding:
            return False  # gained shards not in the refill yet
        if self.config.continuous:
            if self.frontier.queued == 0:
                self._idle_until = await self.store.next_due_at(self.shards)
            return False
        due_at = await self.store.next_due_at(self.shards)
        if due_at is not None and due_at <= now:
            return False
        pending_at = await self.store.next_due_at(self.shards, pending_only=True)
        self.status.waiting = waiting_text(self.frontier.hosts.values(), pending_at, now)
        if pending_at is not None and pending_at - now <= self.config.linger:
            self._idle_until = pending_at
            return False
        if self.coordinator is not None and not await self._cluster_done(now):
            self._idle_until = now + CLUSTER_DONE_POLL  # others may still find work for us
            return False
        self.status.left_for_later = pending_at is not None
        if self.status.left_for_later:
            with contextlib.suppress(StoreError):
                self.status.left_unfetched, self.status.left_retrying = \
                    await self.store.pending_counts(self.shards)
        return True

    async def _cluster_done(self, now: float) -> bool:
        """Many workers: the crawl is over only when no worker holds a URL (none is
        SCHEDULED) and no unfinished cycle of any shard is due within ``--linger``.
        The count comes first: a URL taken after it is one that was QUEUED before, and
        the second look sees it or the row that replaced it."""
        if self._draining:
            return False
        if (await self.store.counts()).get("scheduled", 0):
            return False
        pending_at = await self.store.next_due_at(range(SHARD_COUNT), pending_only=True)
        return pending_at is None or pending_at - now > self.config.linger

    async def _wait(self, now: float) -> None:
        wake = self.frontier.next_wake_at()
        if (wake is None or len(self._tasks) >= self.config.concurrency or self._stop.is_set()
                or not self.may_issue(now)):
            timeout = COMMIT_EVERY  # a finishing fetch or commit wakes us sooner
        else:
            timeout = min(COMMIT_EVERY, max(MIN_WAIT, wake - now))
        idle_until, self._idle_until = self._idle_until, None
        if idle_until is not None and not self._tasks and self.frontier.queued == 0:
            # only retries or backed-off hosts remain: sleep until the first is due
            timeout = min(self.idle_poll, max(REFILL_EVERY, idle_until - now))
        if self._budget_spent_until is not None and self._budget_spent_until > now:
            # the daily budget is spent: nothing may start before it renews
            timeout = min(self.idle_poll, self._budget_spent_until - now)
        if self.config.max_seconds is not None and not self._stop.is_set():
            # --max-seconds is checked when the wait ends: never sleep past it
            deadline = self.status.started_at + self.config.max_seconds
            timeout = min(timeout, max(MIN_WAIT, deadline - now))
        # one event for "a fetch finished or a stop was asked": O(1) per wait, unlike
        # asyncio.wait over every task
        if not self._wakeup.is_set() and timeout > 0:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can drop a cancellation
            # (see cluster/timed_store.py)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wakeup.wait()
        self._wakeup.clear()

    def _report(self, now: float, force: bool = False) -> None:
        if not force and now - self._last_report < REPORT_EVERY:
            return
        self._last_report = now
        s, figures = self.status, self.processor.figures
        s.now = now
        s.fetched, s.errors, s.denied, s.bytes = (figures.fetched, figures.errors,
                                                  figures.denied, figures.bytes)
        s.pages = self._pages_issued
        s.queued = self.frontier.queued
        self.metrics.pending_commits.set(len(self._pending))
        s.in_flight = len(self._tasks)
        if self._tasks or self.frontier.queued:
            s.waiting = ""  # fetching again: not lingering
        s.hosts_active = self.frontier.active_hosts()
        if self.on_progress is not None:
            self.on_progress(s)
