"""One crawl process (:class:`Worker`): the loop frontier → fetch → process → archive →
commit, wired from parts that each own their state.

The parts, and what each owns (its module docstring says which invariants it keeps):

============================  =========================================================
:class:`~.frontier.scheduler.Frontier`   hosts, their politeness state and queued URLs
:class:`~.crawl.fetcher.Fetcher`         one fetch of a lease: request, feedback, parse
:class:`~.crawl.in_flight.InFlight`      the fetch tasks under way and their leases
:class:`~.crawl.committer.Committer`     results waiting for a commit, the commit task
:class:`~.crawl.refiller.Refiller`       the refill, seeds, policies and scope rules
:class:`~.crawl.releaser.Releaser`       URLs given back to the store (and those owed)
:class:`~.crawl.shard_keeper.ShardKeeper`  held shards, their gains, losses, handovers
:class:`~.crawl.day_limits.DayLimits`    the daily budget and per-host day counts
:class:`~.crawl.pacer.Pacer`             stop rules, the crawl's end, waits, figures
============================  =========================================================

The worker itself owns only the loop: its signals (stop, wake-up), the count of page
leases issued, and when each periodic step last ran. Alone (no coordinator) it leases
every shard at start and renews them; in a cluster a
:class:`~courtier.cluster.coordinator.ShardCoordinator` moves them.

The loop is single-threaded asyncio. Fetches run as tasks (at most ``concurrency``);
everything that touches the frontier runs on the loop, so the frontier needs no locks.
Refills and commits run beside the loop as tasks of their own (one of each at a time).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from courtier.archive.base import ArchiveWriter
from courtier.cluster.coordinator import ShardCoordinator
from courtier.cluster.end_gate import CrawlEnd
from courtier.cluster.ip_slots import IpSlots
from courtier.cluster.shard_state import ShardStateKeeper
from courtier.cluster.timed_store import STORE_CALL_TIMEOUT
from courtier.core.clock import Clock
from courtier.core.config import CrawlConfig
from courtier.core.errors import StoreError
from courtier.core.logs import log_event
from courtier.core.urls import SHARD_COUNT
from courtier.crawl.committer import STOP_COMMIT_WAIT, Committer
from courtier.crawl.day_limits import DayLimits
from courtier.crawl.fetcher import Fetcher
from courtier.crawl.in_flight import InFlight
from courtier.crawl.intake import Intake
from courtier.crawl.known_loader import KnownUrlsLoader
from courtier.crawl.metrics import CrawlMetrics
from courtier.crawl.pacer import Pacer
from courtier.crawl.process import PageProcessor
from courtier.crawl.refiller import STORE_RETRY, Refiller
from courtier.crawl.releaser import Releaser
from courtier.crawl.shard_keeper import SHARD_LEASE, ShardKeeper
from courtier.crawl.signals import LoopSignals
from courtier.crawl.status import CrawlStatus
from courtier.fetch.transport import Transport
from courtier.frontier.lease import Lease, LeaseKind
from courtier.frontier.scheduler import Frontier
from courtier.politeness.audit import LeaseAuditor
from courtier.politeness.delays import DelayPolicy
from courtier.politeness.robots import product_token
from courtier.politeness.robots_state import RobotsPolicy
from courtier.store.base import NewUrl, Store

log = logging.getLogger("courtier.worker")

RERANK_EVERY = 60.0      # seconds: URLs that became overdue in memory move ahead
#: seconds between steps of the refresh planner's budget controller (frontier/planner.py)
REPLAN_EVERY = 600.0
POLICY_POLL = 1.0        # seconds: policy overrides from other processes apply within this
#: seconds the turn waits for the refill it started before going on without it, when the
#: frontier holds fewer URLs than the concurrency (a quick refill then reaches it first)
REFILL_INLINE = 0.05
#: store calls a fetch may make in a row (payload lookup, trap recall, back-off, …),
#: counted at STORE_CALL_TIMEOUT each when telling a fetch held by a bug
OVERDUE_STORE_CALLS = 4

__all__ = ["SHARD_LEASE", "CrawlStatus", "Worker"]


@dataclass(slots=True)
class _Ticks:
    """When the loop last did each periodic step (clock time)."""

    rerank: float
    refill: float = float("-inf")
    renew: float = float("-inf")
    policy: float = float("-inf")
    replan: float = float("-inf")


class Worker:
    """The crawl loop and the parts it is wired from (module docstring)."""

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
        end: CrawlEnd | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.archive = archive
        self.clock = clock
        self.intake = intake
        self.signals = LoopSignals()
        self.status = CrawlStatus()
        self.metrics = metrics or CrawlMetrics()
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
        self.metrics.bind_frontier(self.frontier, clock)
        self.metrics.bind_spool(config.data)
        self.processor = PageProcessor(config, intake, archive, self.agent)
        self.auditor = LeaseAuditor()
        #: False once this worker may not start a request (self-fencing; always True alone)
        self.may_start: Callable[[], bool] = (
            coordinator.may_start if coordinator is not None else _always)
        self.record_lags = record_lags
        #: seconds from due to lease of each page lease (simulator figures only)
        self.due_lags: list[float] = []

        self.in_flight = InFlight(self.wake, clock, self._unstarted)
        self.committer = Committer(store, archive, clock, intake, self.metrics, self.status,
                                   self.wake)
        self.metrics.durability_lag.set_function(self.committer.durability_lag)
        self.releaser = Releaser(store, self.frontier)
        # alone too: a restart on the same store continues the throttles and the index
        shard_state = ShardStateKeeper(store, intake.traps, self.processor.duplicates, clock)
        # the owner-local URL state the intake decides links with: loaded per gained shard
        known, known_loader = intake.known, None
        if known is not None:
            known_loader = KnownUrlsLoader(store, known)
            self.metrics.known_urls.set_function(known.__len__)
            self.metrics.known_url_shards_loading.set_function(lambda: len(known.loading()))
        self.shard_keeper = ShardKeeper(
            store, clock, self.frontier, self.metrics, self.in_flight, self.committer,
            self.releaser, self.request_stop, owner, coordinator, shard_state, shards,
            drain_timeout=min(config.total_timeout,
                              coordinator.settings.fence_margin if coordinator else 5.0),
            known_loader=known_loader)
        self.day_limits = DayLimits(config, store, self.frontier, self.request_stop,
                                    self.metrics, self.shard_keeper.held_share)
        ip_slots = None
        if coordinator is not None and config.max_in_flight_per_ip > 0:
            ip_slots = IpSlots(store, coordinator, clock, config.max_in_flight_per_ip,
                               config.ip_delay, config.total_timeout + 5.0)
        self.ip_slots = ip_slots
        self.fetcher = Fetcher(
            config, store, transport, clock, intake, self.agent, self.frontier,
            self.processor, self.committer, self.day_limits, self.auditor, self.metrics,
            self.may_start, ip_slots, shard_state.recall, self.in_flight.answered)
        self.refiller = Refiller(
            config, store, self.frontier, self.processor, intake, self.shard_keeper,
            self.in_flight, self.committer, self.releaser, self.metrics, self.agent,
            resolve_ip, self.wake)
        self.pacer = Pacer(
            config, store, clock, self.frontier, self.processor, self.metrics,
            self.shard_keeper, self.status, self.in_flight, self.committer, self.day_limits,
            self.signals, self.request_stop, on_progress, end)
        #: whether this worker's last look found the crawl over (cluster/end_gate.py)
        self.end = self.pacer.end
        if coordinator is not None:
            coordinator.on_fence = self._fence
            coordinator.on_change = self.wake
            coordinator.crawl_over = self.end.is_over
        self._coordinator = coordinator
        self._pages_issued = 0
        #: seconds after which a fetch still running is logged (in_flight.py): twice its
        #: request's and parse's bounds, and a few store calls
        self._overdue_after = (2 * (config.total_timeout + config.parse_timeout)
                               + OVERDUE_STORE_CALLS * STORE_CALL_TIMEOUT)

    # ---- control ------------------------------------------------------------------------

    async def add_seeds(self, rows: Sequence[NewUrl]) -> int:
        """Queue seed rows; their hosts join the scope of every worker of the crawl."""
        return await self.refiller.add_seeds(rows)

    def request_stop(self, reason: str = "stopped") -> None:
        """First Ctrl-C: issue nothing new, let in-flight fetches finish, commit, exit."""
        if self.signals.stop():
            self.status.stop_reason = reason
            self.committer.bound_stop(self.clock.now() + STOP_COMMIT_WAIT)

    def wake(self) -> None:
        """New work arrived (API seeds, policy): run the loop now instead of at the next tick."""
        self.signals.wake()

    def abort(self) -> None:
        """Second Ctrl-C: cancel in-flight fetches now (their URLs return to the queue);
        discovered URLs already parsed are still committed on the way out."""
        self.request_stop("aborted")
        self.committer.bound_stop(self.clock.now())  # a failing commit is tried once more
        self.in_flight.cancel_all()

    def _fence(self) -> None:
        """The leases may expire before we can renew them: cut every request that may be
        open at a server (a new owner's request to its host would overlap it) and any not
        sent yet. A fetch that has its answer finishes: its result goes to the committer,
        and the store refuses the commit (stale) if the shard changed hands meanwhile.
        Cancelling those too threw away results whose commit was not lost, and their URLs
        were fetched again (docs/testing.md, the kill -9 test's refetches under load)."""
        self.metrics.fenced_requests.inc(self.in_flight.cancel_unanswered())

    # ---- the loop -----------------------------------------------------------------------

    async def run(self) -> CrawlStatus:
        start = self.clock.now()
        self.status.started_at = start
        rounds: asyncio.Task[None] | None = None
        coordinator = self._coordinator
        if coordinator is None:
            await self.shard_keeper.acquire_alone(start)
        else:
            with contextlib.suppress(StoreError):  # the rounds task retries
                await coordinator.round()  # the first leases before the first refill
            rounds = asyncio.create_task(coordinator.run())
        ticks = _Ticks(rerank=start)
        try:
            while True:
                try:
                    if await self._turn(ticks):
                        break
                except StoreError as exc:
                    # a lost connection, a restarting server: nothing in memory is lost
                    # (buffers are retried); pause, then go on with fresh connections
                    self.metrics.store_pauses.inc()
                    log_event(log, logging.ERROR, "store_pause",
                              "store unavailable, pausing %.0f s: %s", STORE_RETRY, exc,
                              reason=str(exc))
                    await asyncio.sleep(STORE_RETRY)
        finally:
            if rounds is not None:
                await self.shard_keeper.end_rounds(rounds)
            await self._shutdown()
        return self.status

    async def _turn(self, ticks: _Ticks) -> bool:
        """One turn of the loop; True when the crawl is over."""
        frontier, refiller, keeper = self.frontier, self.refiller, self.shard_keeper
        now = self.clock.now()
        if not self.signals.stopping:
            self.pacer.check_limits(now, self._pages_issued)
        refilling = refiller.busy
        if not refilling:  # shard moves wait for the refill under way (refiller.py)
            await keeper.apply_changes()
        # the refresh planner steers this worker's share of the daily budget
        self.processor.planner.controller.share = len(keeper.shards) / SHARD_COUNT
        if self._coordinator is None and not refilling and now - ticks.renew >= SHARD_LEASE / 3:
            await keeper.renew(now)
            ticks.renew = now
        if now - ticks.rerank >= RERANK_EVERY:
            # hosts held long are read afresh (their URLs due or better since included)
            frontier.hand_back_stale(RERANK_EVERY)
            frontier.rerank()
            ticks.rerank = now
            if now - ticks.replan >= REPLAN_EVERY:
                self.processor.planner.adjust(min(now - ticks.replan, 3600.0))
                ticks.replan = now
        if now - ticks.policy >= POLICY_POLL:
            await refiller.apply_policies(ticks.policy - 2 * POLICY_POLL)
            await refiller.apply_scope_rules()
            ticks.policy = now
        stopping = self.signals.stopping
        if not stopping and refiller.due(now, ticks.refill):
            # beside the loop, like the commits. With little in memory the turn waits a
            # moment, so a quick refill (most, and every refill of the memory store) is in
            # the frontier before it issues; with work at hand it issues at once (waiting
            # there idled a PostgreSQL worker for REFILL_INLINE at every slower refill)
            refill = refiller.start(now)
            if frontier.queued < self.config.concurrency:
                await asyncio.wait({refill}, timeout=REFILL_INLINE)
            ticks.refill = now
        self._collect_denials(now)
        self._name_overdue(now)
        await self.releaser.release_returned()
        await self.day_limits.begin(now)  # once a shard is held (day_limits.py)
        self.day_limits.adopt(now)
        await self.fetcher.requeue()
        if (not stopping and now >= self.fetcher.archive_trouble_until
                and self.committer.may_issue(now)):
            self._issue()
        self.committer.maybe_start(now, fetches_running=bool(self.in_flight))
        self.pacer.report(now, self._pages_issued)
        if not self.in_flight and self.committer.idle and not refiller.busy:
            if stopping:
                return True
            if (not refiller.held_back and frontier.queued == 0
                    and await self.pacer.nothing_due(now)):
                self.status.stop_reason = "nothing due"
                return True
        await self.pacer.wait(now)
        return False

    def _issue(self) -> None:
        """Start fetches while the concurrency, the stop rules and the budget allow."""
        frontier, max_pages = self.frontier, self.config.max_pages
        now = self.clock.now()
        while len(self.in_flight) < self.config.concurrency:
            if max_pages is not None and self._pages_issued >= max_pages:
                return
            if not self.day_limits.allows(now):
                return
            lease = frontier.next_lease()
            if lease is None:
                return
            if not self.may_start():  # self-fenced: the lease goes back unsent
                frontier.return_lease(lease)
                self.metrics.re_lease("fenced")
                return
            host = frontier.hosts[lease.host_key]
            if self.auditor.on_issue(lease.host_key, lease.issued_at, lease.delay,
                                     frontier.max_in_flight_of(host)):
                self.metrics.politeness_violation(lease.host_key)
                log_event(log, logging.ERROR, "politeness_violation",
                          "politeness self-check: %s", self.auditor.last[-1],
                          host=lease.host_key, url=lease.url)
            if lease.kind is LeaseKind.PAGE:
                self._pages_issued += 1
                self.day_limits.count_page(lease.issued_at, host)
                if lease.due is not None:
                    lag = max(0.0, lease.issued_at - lease.due.next_fetch_at)
                    self.metrics.eligible_lag.observe(lag)
                    if self.record_lags:
                        self.due_lags.append(lag)
            self.end.found_work()  # a fetch: the crawl is not over for this worker
            self.in_flight.start(lease, self.fetcher.fetch)

    def _unstarted(self, lease: Lease) -> None:
        """A fetch task cancelled before its first step (a fence, a lost shard, a stop in
        the turn that started it): its fetch never ran, so its lease goes back here."""
        self.fetcher.cancelled(lease)

    def _name_overdue(self, now: float) -> None:
        """A fetch running far past every bound of its steps is held by a bug (its host is
        busy for ever, the crawl never ends): logged once, with where it waits."""
        for lease, seconds, answered, where in self.in_flight.overdue(now, self._overdue_after):
            log_event(log, logging.ERROR, "fetch_overdue",
                      "the fetch of %s has run for %.0f s (%s), past every bound of its "
                      "steps; it waits at %s", lease.url, seconds,
                      "answered" if answered else "no answer yet", where,
                      url=lease.url, host=lease.host_key, seconds=round(seconds),
                      reason=where)

    def _collect_denials(self, now: float) -> None:
        """URLs the frontier denied (robots.txt, blocked address) become results."""
        frontier = self.frontier
        for due, reason, digest in frontier.take_denied():
            epoch = frontier.epochs.get(due.shard, 0)
            self.committer.add(self.processor.denied(due, reason, digest, epoch, now))

    # ---- shutdown -----------------------------------------------------------------------

    async def _shutdown(self) -> None:
        # the end of a crawl that no stop asked for ("nothing due", an error) is bounded too
        self.committer.bound_stop(self.clock.now() + STOP_COMMIT_WAIT)
        cut = self.in_flight.host_keys()
        self.in_flight.cancel_all()
        await self.in_flight.settle()
        await self.fetcher.close()  # no fetch asks any more
        await self.refiller.settle()  # its rows reach the frontier, then go back below
        self._collect_denials(self.clock.now())
        await self.committer.flush()  # the commit under way, then the rest (bounded)
        try:
            await self.releaser.release(self.frontier.release_all())
        except StoreError as exc:  # due earlier than meant: the next owner reads them
            log.error("stopping: could not postpone %d queued URLs: %s",
                      self.releaser.owed, exc)
        if self.ip_slots is not None:
            await self.ip_slots.settle()  # every slot this process held is given back
        if self._coordinator is not None:
            await self.shard_keeper.hand_over_all(cut)
        else:
            await self.shard_keeper.save_alone()
        self.archive.flush()
        self.fetcher.close_parsers()
        self.status.now = self.clock.now()
        self.pacer.report(self.status.now, self._pages_issued, force=True)


def _always() -> bool:
    return True
