"""When the loop stops and how long it sleeps (:class:`Pacer`): the stop rules
(``--max-pages``, ``--max-seconds``), the end of a one-shot crawl (nothing due now, no
unfinished cycle within ``--linger``; with many workers, none of them holding a URL),
the wait between turns, and the live figures (:class:`~courtier.crawl.status.CrawlStatus`)
handed to the progress display. Each look for the end is a verdict, kept by the
worker's :class:`~courtier.cluster.end_gate.CrawlEnd`: the crawl is over, or there is
work (a look held back by the :class:`ShareGate`, or one made while gained shards are
still being indexed, says neither).

Owns: until when an idle worker sleeps (retries or backed-off hosts only; kept from the
look at the store that found it until work turns up, so a lingering crawl wakes about
once per ``idle_poll``, not at every refill's end), what a lingering crawl waits for and
how long it slept for it (``CrawlStatus.waited``, said by the final line), the gate on
looks for the crawl's end (:class:`ShareGate`), when the figures were last reported, and
the longest idle sleep (``idle_poll``, which bounds how late work added from outside is
noticed).

Invariants: the loop never spins (each wait is at least ``MIN_WAIT`` when it has to wait),
never sleeps past ``--max-seconds`` nor past the next host that may be fetched, and wakes
at once when a fetch, commit or refill ends or a stop is asked.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from courtier.cluster.end_gate import CrawlEnd
from courtier.core.clock import Clock
from courtier.core.config import CrawlConfig
from courtier.core.errors import StoreError
from courtier.core.urls import SHARD_COUNT
from courtier.crawl.committer import COMMIT_EVERY, Committer
from courtier.crawl.day_limits import DayLimits
from courtier.crawl.in_flight import InFlight
from courtier.crawl.metrics import CrawlMetrics
from courtier.crawl.process import PageProcessor
from courtier.crawl.progress_text import unfinished_urls_text, waited_for_text, waiting_line
from courtier.crawl.refiller import REFILL_EVERY
from courtier.crawl.shard_keeper import ShardKeeper
from courtier.crawl.signals import LoopSignals
from courtier.crawl.status import CrawlStatus
from courtier.frontier.scheduler import Frontier
from courtier.store.base import Store

MIN_WAIT = 0.001         # never spin: a host that is "ready" but cannot start waits a little
IDLE_POLL = 5.0          # longest sleep while waiting for retries (new seeds wait at most this)
REPORT_EVERY = 0.25      # seconds between progress figure updates
CLUSTER_DONE_POLL = 1.0  # seconds between "is the whole crawl done?" looks of an idle worker
#: an idle worker's look for the crawl's end spends at most about this share of its idle
#: time in the store: after a look that took t seconds the next one waits t / share.
#: The look scans rows (docs/design.md, "Known limits"): ~6-11 s on a 10 M-URL store
END_CHECK_SHARE = 0.1


class ShareGate:
    """Runs a costly look at most about ``share`` of the time: after a look that took t
    seconds of ``clock``, the next one waits t / share, and is answered False until then.

    Owns: the time before which no look runs."""

    def __init__(self, clock: Clock, share: float) -> None:
        self._clock = clock
        self._share = share
        self._after = float("-inf")

    async def ask(self, now: float, look: Callable[[float], Awaitable[bool]]) -> bool:
        if now < self._after:
            return False
        started = self._clock.now()
        answer = await look(now)
        self._after = started + (self._clock.now() - started) / self._share
        return answer


class Pacer:
    """The loop's stop rules, end, waits and figures."""

    def __init__(self, config: CrawlConfig, store: Store, clock: Clock, frontier: Frontier,
                 processor: PageProcessor, metrics: CrawlMetrics, shards: ShardKeeper,
                 status: CrawlStatus, in_flight: InFlight, committer: Committer,
                 day_limits: DayLimits, signals: LoopSignals,
                 request_stop: Callable[[str], None],
                 on_progress: Callable[[CrawlStatus], None] | None,
                 end: CrawlEnd | None = None) -> None:
        self._config = config
        self._store = store
        self._clock = clock
        self._frontier = frontier
        self._processor = processor
        self._metrics = metrics
        self._shards = shards
        self._status = status
        self._in_flight = in_flight
        self._committer = committer
        self._day_limits = day_limits
        self._signals = signals
        self._request_stop = request_stop
        self._on_progress = on_progress
        #: the verdict of the last look for the crawl's end
        self.end = end if end is not None else CrawlEnd()
        #: longest idle sleep; bounds how late work added from outside is noticed
        self.idle_poll = IDLE_POLL
        self._idle_until: float | None = None
        #: what the idle sleeps wait for while a one-shot crawl lingers (else None), and
        #: the unfinished URLs counted for it in this idle spell
        self._lingering_for: str | None = None
        self._unfinished: str | None = None
        self._end_look = ShareGate(clock, END_CHECK_SHARE)
        self._last_report = float("-inf")

    def check_limits(self, now: float, pages_issued: int) -> None:
        config = self._config
        if config.max_pages is not None and pages_issued >= config.max_pages:
            self._request_stop("max pages")
        elif (config.max_seconds is not None
              and now - self._status.started_at >= config.max_seconds):
            # a bound, not a wish: fetches in flight are cancelled and their URLs released
            self._request_stop("max seconds")
            self._in_flight.cancel_all()

    async def nothing_due(self, now: float) -> bool:
        """:meth:`_nothing_due_now`, at most about ``END_CHECK_SHARE`` of the idle time:
        after a look that took t seconds, False without a look for t / share seconds (the
        crawl's end is noticed that much later; work that turns up is refilled as ever)."""
        return await self._end_look.ask(now, self._nothing_due_now)

    async def _nothing_due_now(self, now: float) -> bool:
        """A one-shot crawl ends when nothing is due now and no unfinished fetch cycle
        (a retry, a host in back-off or with robots.txt unreachable) is due within
        ``--linger`` seconds; later ones stay queued for the next run. Recrawls are
        never waited for. The look's verdict is kept in ``end``; a worker started with
        others by one launcher leaves only once each has found the crawl over (or ended:
        cluster/end_gate.py), and looks again about every :data:`CLUSTER_DONE_POLL`
        until then."""
        store, shards, status = self._store, self._shards.shards, self._status
        if self._shards.rebuilding:
            return False  # gained shards not in the refill yet
        if self._config.continuous:
            if self._frontier.queued == 0:
                self._idle_until = await store.next_due_at(shards)
            return False
        due_at = await store.next_due_at(shards)
        if due_at is not None and due_at <= now:
            self.end.found_work()
            return False
        pending_at = await store.next_due_at(shards, pending_only=True)
        waited_for = waited_for_text(self._frontier.hosts.values(), now)
        status.waiting = waiting_line(waited_for, pending_at, now)
        if pending_at is not None and pending_at - now <= self._config.linger:
            self._idle_until = pending_at
            self.end.found_work()
            self._lingering_for = waited_for or await self._unfinished_urls()
            return False
        self._lingering_for = self._unfinished = None
        if self._shards.coordinator is not None and not await self._cluster_done(now):
            self._idle_until = now + CLUSTER_DONE_POLL  # others may still find work for us
            self.end.found_work()
            return False
        self.end.found_over()
        if not self.end.may_leave():  # siblings still crawling: look again in a moment
            self._idle_until = now + CLUSTER_DONE_POLL
            status.waiting = "finished: waiting for the other workers to finish"
            return False
        status.left_for_later = pending_at is not None
        if status.left_for_later:
            with contextlib.suppress(StoreError):
                status.left_unfetched, status.left_retrying = \
                    await store.pending_counts(shards)
        return True

    async def _unfinished_urls(self) -> str:
        """What a lingering crawl waits for when no host is in back-off or without its
        robots.txt (URLs retrying after their own failures): their count, read once per
        idle spell (a scan of the queued rows: ``Store.pending_counts``)."""
        if self._unfinished is None:
            try:
                never, retrying = await self._store.pending_counts(self._shards.shards)
            except StoreError:
                return ""
            self._unfinished = unfinished_urls_text(never, retrying)
        return self._unfinished

    async def _cluster_done(self, now: float) -> bool:
        """Many workers: the crawl is over only when no worker holds a URL and no
        unfinished cycle of any shard is due within ``--linger``. A URL a worker holds is
        QUEUED and due in the store until its commit (the refill reads without marking),
        so the second look sees it; none may be SCHEDULED either (rows an older version
        marked, until their shard's owner resets them).
        The count comes first: a URL taken after it is one that was QUEUED before, and
        the second look sees it or the row that replaced it."""
        if self._shards.draining:
            return False
        if (await self._store.counts()).get("scheduled", 0):
            return False
        pending_at = await self._store.next_due_at(range(SHARD_COUNT), pending_only=True)
        return pending_at is None or pending_at - now > self._config.linger

    def idle(self) -> bool:
        """Only retries or backed-off hosts (or recrawls) remain, and the store said when
        the first is due: the loop sleeps until then (or ``idle_poll``), and so may the
        loop-lag monitor (crawl/loopwatch.py)."""
        return self._idle_until is not None and not self._in_flight \
            and self._frontier.queued == 0

    async def wait(self, now: float) -> None:
        """Sleep until the next thing to do (see the module docstring)."""
        frontier, signals = self._frontier, self._signals
        wake = frontier.next_wake_at()
        if (wake is None or len(self._in_flight) >= self._config.concurrency
                or signals.stopping or not self._committer.may_issue(now)):
            timeout = COMMIT_EVERY  # a finishing fetch or commit wakes us sooner
        else:
            timeout = min(COMMIT_EVERY, max(MIN_WAIT, wake - now))
        idle_until = self._idle_until
        lingering = None
        if idle_until is not None and self.idle():
            lingering = self._lingering_for
            # only retries or backed-off hosts remain: sleep until the first is due. Kept
            # for the turns until then (a refill's end wakes the loop at once, and the next
            # look at the store is not due yet), so a lingering crawl wakes about once
            # per idle_poll instead of every COMMIT_EVERY (bench/linger_bench.py)
            timeout = min(self.idle_poll, max(REFILL_EVERY, idle_until - now))
        else:
            self._idle_until = None  # working again: the next idle spell looks anew
            self._lingering_for = self._unfinished = None
        spent_until = self._day_limits.spent_until
        if spent_until is not None and spent_until > now:
            # the daily budget is spent: nothing may start before it renews
            timeout = min(self.idle_poll, spent_until - now)
        if self._config.max_seconds is not None and not signals.stopping:
            # --max-seconds is checked when the wait ends: never sleep past it
            deadline = self._status.started_at + self._config.max_seconds
            timeout = min(timeout, max(MIN_WAIT, deadline - now))
        if not signals.wakeup.is_set() and timeout > 0:
            began = self._clock.now()
            # asyncio.timeout, not wait_for: on 3.11 wait_for can drop a cancellation
            # (see cluster/timed_store.py)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await signals.wakeup.wait()
            if lingering is not None:  # the final line says how long, and for what
                self._status.waited += max(0.0, self._clock.now() - began)
                self._status.waited_for = lingering
        signals.wakeup.clear()

    def report(self, now: float, pages_issued: int, force: bool = False) -> None:
        """Update the live figures (at most every ``REPORT_EVERY`` unless forced)."""
        if not force and now - self._last_report < REPORT_EVERY:
            return
        self._last_report = now
        s, figures, frontier = self._status, self._processor.figures, self._frontier
        s.now = now
        s.fetched, s.errors, s.denied, s.bytes = (figures.fetched, figures.errors,
                                                  figures.denied, figures.bytes)
        s.pages = pages_issued
        s.queued = frontier.queued
        self._metrics.pending_commits.set(len(self._committer.pending))
        s.in_flight = len(self._in_flight)
        if self._in_flight or frontier.queued:
            s.waiting = ""  # fetching again: not lingering
        s.hosts_active = frontier.active_hosts()
        if self._on_progress is not None:
            self._on_progress(s)
