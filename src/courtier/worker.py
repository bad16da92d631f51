"""One crawl process: the loop frontier → fetch → archive → commit.

One fetch is :mod:`courtier.worker_fetch`; the stop rules, the end of a crawl, the
waits and the live figures are :mod:`courtier.worker_pacing`; shards gained, lost and handed over
while the loop runs (many workers on one crawl) are :mod:`courtier.worker_shards`.
Alone (no coordinator) the worker leases every shard at start and renews them;
a shard whose lease it loses is dropped, not the whole crawl.

The loop is single-threaded asyncio. Fetches run as tasks (at most
``concurrency``); everything that touches the frontier runs on the loop, so
the frontier needs no locks. Results are committed in batches (every 0.5 s or
200 results) after the WARC writer has flushed the records they reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from courtier.archive.base import ArchiveWriter
from courtier.clock import Clock
from courtier.cluster.coordinator import ShardCoordinator
from courtier.cluster.ip_slots import IpSlots
from courtier.cluster.shard_state import ShardStateKeeper
from courtier.cluster.shared_scope import ScopeFollower
from courtier.config import CrawlConfig
from courtier.day_counts import DayCountLedger
from courtier.dedup.payload_lookups import PayloadLookups
from courtier.errors import StoreError
from courtier.fetch.transport import FetchLimits, Transport
from courtier.frontier.budget import DailyBudget
from courtier.frontier.lease import Lease, LeaseKind
from courtier.frontier.scheduler import Frontier
from courtier.intake import Intake
from courtier.metrics import CrawlMetrics
from courtier.parse.offload import OffLoopParser
from courtier.politeness.audit import LeaseAuditor
from courtier.politeness.delays import DelayPolicy
from courtier.politeness.robots import MAX_ROBOTS_BYTES, product_token
from courtier.politeness.robots_state import RobotsPolicy
from courtier.process import PageProcessor
from courtier.store.base import (
    DAILY_BUDGET_KEY,
    DueUrl,
    FetchCommit,
    HostStatsDelta,
    NewUrl,
    Store,
)
from courtier.urls import SHARD_COUNT
from courtier.worker_commit import STOP_COMMIT_WAIT, CommitSteps
from courtier.worker_fetch import FetchSteps
from courtier.worker_pacing import COMMIT_EVERY, IDLE_POLL, CrawlStatus, PacingSteps
from courtier.worker_refill import REFILL_INLINE, STORE_RETRY, RefillSteps
from courtier.worker_shards import SHARD_LEASE, ShardSteps

log = logging.getLogger("courtier.worker")

COMMIT_BATCH = 200
RERANK_EVERY = 60.0      # seconds: URLs that became overdue in memory move ahead
#: seconds between steps of the refresh planner's budget controller (frontier/planner.py)
REPLAN_EVERY = 600.0
POLICY_POLL = 1.0        # seconds: policy overrides from other processes apply within this

__all__ = ["COMMIT_BATCH", "COMMIT_EVERY", "SHARD_LEASE", "CrawlStatus", "Worker"]


@dataclass(slots=True)
class _Ticks:
    """When the loop last did each periodic step (clock time)."""

    rerank: float
    commit: float = float("-inf")
    refill: float = float("-inf")
    renew: float = float("-inf")
    policy: float = float("-inf")


class Worker(RefillSteps, FetchSteps, ShardSteps, CommitSteps, PacingSteps):
    def __init__(
        self,
        config: CrawlConfig,
        store: Store,
        transport: Transport,
        archive: ArchiveWriter,
        clock: Clock,
        intake: Intake,
        owner: str = "local",
        shards: Sequence[int] | None = None,
        on_progress: Callable[[CrawlStatus], None] | None = None,
        resolve_ip: Callable[[str], Awaitable[str | None]] | None = None,
        record_lags: bool = False,
        metrics: CrawlMetrics | None = None,
        coordinator: ShardCoordinator | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.transport = transport
        self.archive = archive
        self.clock = clock
        self.intake = intake
        self.owner = owner
        self.coordinator = coordinator
        #: shards this worker refills from (held, not draining); the coordinator's in a cluster
        self.shards = [] if coordinator is not None else (
            list(range(SHARD_COUNT)) if shards is None else list(shards))
        self.may_start = coordinator.may_start if coordinator is not None else _always
        if coordinator is not None:
            coordinator.on_fence = self._fence
            coordinator.on_change = self.wake
        self.ip_slots = None
        if coordinator is not None and config.max_in_flight_per_ip > 0:
            self.ip_slots = IpSlots(store, coordinator, clock, config.max_in_flight_per_ip,
                                    config.ip_delay, config.total_timeout + 5.0)
        self._task_leases: dict[asyncio.Task[None], Lease] = {}
        self._gained: dict[int, tuple[float, bool]] = {}
        self._draining: dict[int, float] = {}
        self._forgetting: set[int] = set()
        self._drain_cancels: dict[str, float] = {}
        self._unreleased_shards: set[int] = set()
        #: a drain cancels fetches still running after this (before the lease is at risk)
        self.drain_timeout = min(config.total_timeout,
                                 coordinator.settings.fence_margin if coordinator else 5.0)
        self.on_progress = on_progress
        self.resolve_ip = resolve_ip
        self.record_lags = record_lags
        self.idle_poll = IDLE_POLL
        #: seconds from due to lease of each page lease (simulator figures only)
        self.due_lags: list[float] = []
        self.agent = product_token(config.user_agent)
        self.frontier = Frontier(
            clock, self.agent,
            DelayPolicy(delay=config.delay),
            RobotsPolicy(expiry=config.robots_expiry),
            max_in_flight_per_host=config.max_in_flight_per_host,
            release_horizon=max(30.0, 2 * config.delay),
            max_in_flight_per_ip=config.max_in_flight_per_ip,
            ip_delay=config.ip_delay,
        )
        self.processor = PageProcessor(config, intake, archive, self.agent)
        self.payload_lookups = PayloadLookups(store)
        #: trap statistics and near-duplicate index follow the shards (cluster/shard_state.py)
        self.shard_state = None if coordinator is None else ShardStateKeeper(
            store, intake.traps, self.processor.duplicates, clock)
        self.metrics = metrics or CrawlMetrics()
        self.metrics.bind_frontier(self.frontier, clock)
        self._flushing_from: float | None = None   # oldest fetch time of the batch in commit
        self._commit_task: asyncio.Task[None] | None = None  # worker_commit.py
        self._commit_failing = False
        self._commit_give_up_at = float("inf")  # worker_commit.py: a stop bounds it
        self._given_up = 0
        self._commit_started = float("-inf")
        self._refill_task: asyncio.Task[None] | None = None  # worker_refill.py
        self._refill_retry_at = float("-inf")
        self.metrics.durability_lag.set_function(self._durability_lag)
        self.metrics.bind_spool(config.data)
        self.auditor = LeaseAuditor()
        self.parsers = OffLoopParser(timeout=config.parse_timeout)
        self.limits = FetchLimits(
            connect_timeout=config.connect_timeout, read_timeout=config.read_timeout,
            total_timeout=config.total_timeout, max_body_bytes=config.max_body_bytes,
            max_decoded_bytes=config.max_decoded_bytes,
            low_speed_limit=config.low_speed_limit, low_speed_time=config.low_speed_time,
            header_timeout=config.header_timeout,
        )
        self.robots_limits = dataclasses.replace(
            self.limits, max_body_bytes=MAX_ROBOTS_BYTES, max_decoded_bytes=MAX_ROBOTS_BYTES)
        self.status = CrawlStatus()
        self._pending: list[FetchCommit] = []
        self._committing: list[FetchCommit] = []         # the batch of the commit under way
        self._host_stats: dict[str, HostStatsDelta] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._stop = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._last_report = float("-inf")
        self._pages_issued = 0
        self._idle_until: float | None = None
        self._end_check_after = float("-inf")
        self._archive_trouble_until = float("-inf")
        self._budget: DailyBudget | None = None
        self._budget_spent_until: float | None = None
        self._day_counts = DayCountLedger(store)
        self._last_replan = float("-inf")
        self._scope_rules = ScopeFollower(intake.scope)  # rules stored by any process
        self._unqueued: list[NewUrl] = []
        self._refill_uncertain = False
        self._loaded: list[DueUrl] = []                  # refilled, hosts not registered yet
        self._unreleased: list[tuple[DueUrl, float]] = []  # to give back (after a store error)

    # ---- control ------------------------------------------------------------------------

    def request_stop(self, reason: str = "stopped") -> None:
        """First Ctrl-C: issue nothing new, let in-flight fetches finish, commit, exit."""
        if not self._stop.is_set():
            self.status.stop_reason = reason
            self._stop.set()
            self._wakeup.set()
            self._commit_give_up_at = self.clock.now() + STOP_COMMIT_WAIT

    def wake(self) -> None:
        """New work arrived (API seeds, policy): run the loop now instead of at the next tick."""
        self._wakeup.set()

    def abort(self) -> None:
        """Second Ctrl-C: cancel in-flight fetches now (their URLs return to the queue);
        discovered URLs already parsed are still committed on the way out."""
        self.request_stop("aborted")
        self._commit_give_up_at = self.clock.now()  # a failing commit is tried once more
        self._cancel_in_flight()

    def _cancel_in_flight(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def _fence(self) -> None:
        """The leases may expire before we can renew them: cancel every fetch now."""
        self.metrics.fenced_requests.inc(sum(not t.done() for t in self._tasks))
        self._cancel_in_flight()

    # ---- the loop -----------------------------------------------------------------------

    async def run(self) -> CrawlStatus:
        clock, store, frontier = self.clock, self.store, self.frontier
        start = clock.now()
        self.status.started_at = start
        rounds: asyncio.Task[None] | None = None
        if self.coordinator is None:
            epochs = await store.acquire_shards(self.owner, self.shards, start, SHARD_LEASE)
            frontier.epochs = dict(epochs)
            self.shards = sorted(epochs)
            await store.reset_scheduled(self.shards, epochs)
        else:
            with contextlib.suppress(StoreError):  # the rounds task retries
                await self.coordinator.round()  # the first leases before the first refill
            rounds = asyncio.create_task(self.coordinator.run())
        await self._restore_budget(start)
        ticks = _Ticks(rerank=start)
        try:
            while True:
                try:
                    if await self._turn(ticks, start):
                        break
                except StoreError as exc:
                    # a lost connection, a restarting server: nothing in memory is lost
                    # (buffers are retried); pause, then go on with fresh connections
                    self.metrics.store_pauses.inc()
                    log.error("store unavailable, pausing %.0f s: %s", STORE_RETRY, exc)
                    await asyncio.sleep(STORE_RETRY)
        finally:
            if rounds is not None:
                await self._end_rounds(rounds)  # worker_shards.py
            await self._shutdown()
        return self.status

    async def _turn(self, ticks: _Ticks, start: float) -> bool:
        """One turn of the loop; True when the crawl is over."""
        clock, frontier = self.clock, self.frontier
        now = clock.now()
        if not self._stop.is_set():
            self._check_limits(now, start)
        refilling = self._refill_task is not None
        if not refilling:  # shard moves wait for the refill under way (worker_refill.py)
            await self._apply_shard_changes()
        # the refresh planner steers this worker's share of the daily budget
        self.processor.planner.controller.share = len(self.shards) / SHARD_COUNT
        if self.coordinator is None and not refilling and now - ticks.renew >= SHARD_LEASE / 3:
            await self._renew(now)
            ticks.renew = now
        if now - ticks.rerank >= RERANK_EVERY:
            frontier.rerank()
            ticks.rerank = now
            if now - self._last_replan >= REPLAN_EVERY:
                self.processor.planner.adjust(min(now - self._last_replan, 3600.0))
                self._last_replan = now
        if now - ticks.policy >= POLICY_POLL:
            await self._apply_policies(ticks.policy - 2 * POLICY_POLL)
            await self._apply_scope_rules()
            ticks.policy = now
        stopping = self._stop.is_set()
        if (not stopping and not refilling and now - ticks.refill >= self._refill_interval()
                and now >= self._refill_retry_at):
            # beside the loop, like the commits. With little in memory the turn waits a
            # moment, so a quick refill (most, and every refill of the memory store) is in
            # the frontier before it issues; with work at hand it issues at once (waiting
            # there idled a PostgreSQL worker for REFILL_INLINE at every slower refill)
            refill = self._start_refill(now)
            if frontier.queued < self.config.concurrency:
                await asyncio.wait({refill}, timeout=REFILL_INLINE)
            ticks.refill = now
        self._collect_denials(now)
        await self._release_returned()
        self._adopt_day_counts(now)
        if self._unqueued:
            rows, self._unqueued = self._unqueued, []
            try:
                await self.store.add_urls(rows)
            except StoreError:
                self._unqueued = rows + self._unqueued
                raise
        if not stopping and now >= self._archive_trouble_until and self.may_issue(now):
            self._issue()
        if self._pending and not self.committing and (
                len(self._pending) >= COMMIT_BATCH or now - ticks.commit >= COMMIT_EVERY
                or not self._tasks):
            self._start_commit()  # beside the loop (worker_commit.py)
            ticks.commit = now
        self._report(now)
        if (not self._tasks and not self._pending and not self.committing
                and self._refill_task is None):
            if stopping:
                return True
            held_back = self._loaded or self._refill_uncertain  # a failed refill's rows
            if not held_back and frontier.queued == 0 and await self._nothing_due(now):
                self.status.stop_reason = "nothing due"
                return True
        await self._wait(now)
        return False

    def _issue(self) -> None:
        max_pages = self.config.max_pages
        now = self.clock.now()
        while len(self._tasks) < self.config.concurrency:
            if max_pages is not None and self._pages_issued >= max_pages:
                return
            if not self._budget_left(now):
                return
            lease = self.frontier.next_lease()
            if lease is None:
                return
            if not self.may_start():  # self-fenced: the lease goes back unsent
                self.frontier.return_lease(lease)
                return
            host = self.frontier.hosts[lease.host_key]
            if self.auditor.on_issue(lease.host_key, lease.issued_at, lease.delay,
                                     self.frontier.max_in_flight_of(host)):
                self.metrics.politeness_violations.inc()
                log.error("politeness self-check: %s", self.auditor.last[-1])
            if lease.kind is LeaseKind.PAGE:
                self._pages_issued += 1
                if self._budget is not None:
                    self._budget.spend(lease.issued_at)
                    self._day_counts.add(DAILY_BUDGET_KEY, self._budget.day_start)
                if host.policy.max_pages is not None and host.day_start is not None:
                    self._day_counts.add(host.host_key, host.day_start)
                if lease.due is not None:
                    lag = max(0.0, lease.issued_at - lease.due.next_fetch_at)
                    self.metrics.eligible_lag.observe(lag)
                    if self.record_lags:
                        self.due_lags.append(lag)
            task = asyncio.create_task(self._fetch(lease))
            self._tasks.add(task)
            self._task_leases[task] = lease
            task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._task_leases.pop(task, None)
        self._wakeup.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("fetch task failed", exc_info=task.exception())

    # ---- commits and shutdown -----------------------------------------------------------

    async def _shutdown(self) -> None:
        # the end of a crawl that no stop asked for ("nothing due", an error) is bounded too
        self._commit_give_up_at = min(self._commit_give_up_at,
                                      self.clock.now() + STOP_COMMIT_WAIT)
        cut = {lease.host_key for lease in self._task_leases.values()}
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.payload_lookups.close()  # no fetch asks any more
        await self._settle_refill()  # its rows reach the frontier, then go back below
        self._collect_denials(self.clock.now())
        await self._flush()  # the commit under way, then the rest (bounded once stopping)
        try:
            await self._release_items(self.frontier.release_all())
        except StoreError as exc:  # they stay SCHEDULED: the next owner resets them
            log.error("stopping: could not give %d queued URLs back: %s",
                      len(self._unreleased), exc)
        if self.ip_slots is not None:
            await self.ip_slots.settle()  # every slot this process held is given back
        if self.coordinator is not None:
            await self._hand_over_all(cut)
        self.archive.flush()
        self.parsers.close()
        self.status.now = self.clock.now()
        self._report(self.status.now, force=True)


def _always() -> bool:
    return True
