"""What a worker reads from the store around the fetches (:class:`Refiller`): seeds and
shared scope rules, policy overrides, and the refill (rows, then each new host's robots
copy, policy, day counts and politeness clock, all read before any of them is
registered).

Owns: the refill task (one at a time) and when the next may start after a store error,
and the scope rules followed from the store.

Invariants:

* the refill reads (``Store.read_due``) and writes nothing: its rows stay QUEUED in the
  store, so a store error anywhere in it strands nothing, and a new owner of a shard
  (after a handover or a crash) simply reads them again;
* a refill never returns a row this worker holds: every host of which it holds
  anything (:meth:`Refiller.held_hosts`) is skipped, from before the read until the
  commit of its last result is acknowledged;
* a host is registered only once everything about it has been read, and before any
  request to it (its politeness clock from an earlier owner included);
* a refill adds rows only of shards still held: while it runs the loop applies no shard
  moves (``busy``).

Rows an older version marked SCHEDULED (a crawl upgraded mid-way) are not read; the
owner returns them to QUEUED when it gains their shard (``reset_scheduled``, in
shard_keeper.py), as before, and reads them from then on.

The refill runs as a task beside the loop: a refill is a store round trip or several,
which took up to seconds on PostgreSQL with thousands of rows, and the loop issued
nothing while it waited. A store error pauses refills for ``STORE_RETRY`` while fetches
and commits go on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from courtier.cluster.shared_scope import ScopeFollower
from courtier.core.config import CrawlConfig
from courtier.core.errors import StoreError
from courtier.core.logs import log_event
from courtier.crawl import planning
from courtier.crawl.committer import Committer
from courtier.crawl.domain_policy import policy_in_force, policy_of_record
from courtier.crawl.in_flight import InFlight
from courtier.crawl.intake import Intake, seed_scope_rules
from courtier.crawl.metrics import CrawlMetrics
from courtier.crawl.process import PageProcessor
from courtier.crawl.releaser import Releaser
from courtier.crawl.shard_keeper import ShardKeeper
from courtier.frontier.host import domain_host_key
from courtier.frontier.scheduler import Frontier
from courtier.politeness.robots_offload import parse_off_loop
from courtier.store.base import DueUrl, NewUrl, Store

log = logging.getLogger("courtier.worker")

#: rows one refill takes at most. The loop waits for the refill (a store round trip
#: plus the plan values of the rows); 10,000 rows at once held the dispatch for seconds
#: on PostgreSQL, while a refill every REFILL_EVERY of this many keeps ~8,000 rows/s
#: coming, several times what one worker fetches.
REFILL_MAX_ROWS = 2_000
#: seconds between refills while the frontier runs short of URLs in memory
REFILL_EVERY = 0.25
#: seconds between refills while it holds ample work (REFILL_AMPLE leases' worth)
REFILL_CALM = 1.0
REFILL_AMPLE = 16
#: seconds to pause after a store error (the loop, or the refills after a failed one)
STORE_RETRY = 1.0


class Refiller:
    """Seeds, policies, scope rules and the refill of one worker."""

    def __init__(self, config: CrawlConfig, store: Store, frontier: Frontier,
                 processor: PageProcessor, intake: Intake, shards: ShardKeeper,
                 in_flight: InFlight, committer: Committer, releaser: Releaser,
                 metrics: CrawlMetrics, agent: str,
                 resolve_ip: Callable[[str], Awaitable[str | None]] | None,
                 wake: Callable[[], None]) -> None:
        self._config = config
        self._store = store
        self._frontier = frontier
        self._processor = processor
        self._intake = intake
        self._shards = shards
        self._in_flight = in_flight
        self._committer = committer
        self._releaser = releaser
        self._metrics = metrics
        self._agent = agent
        self._resolve_ip = resolve_ip
        self._wake = wake
        self._scope_rules = ScopeFollower(intake.scope)  # rules stored by any process
        self._task: asyncio.Task[None] | None = None
        self._retry_at = float("-inf")

    # ---- seeds, scope rules and policies ---------------------------------------------------

    async def add_seeds(self, rows: Sequence[NewUrl]) -> int:
        """Queue seed rows; their hosts join the scope of every worker of the crawl."""
        # the rules first: a worker that loads one of these rows has the rule to load too
        await self._store.add_scope_rules(seed_scope_rules(rows))
        added = await self._store.add_urls(rows)
        self._intake.remember(r.url_key for r in rows)
        return added

    async def apply_scope_rules(self) -> None:
        """Scope rules added by any process (seeds given to another worker) apply here."""
        await self._scope_rules.poll(self._store)

    async def apply_policies(self, since: float) -> None:
        """Apply policy overrides set by another process (CLI, API) to known hosts."""
        frontier = self._frontier
        for record in await self._store.policies_changed(since):
            key = record.host_key
            if frontier.knows_host(key):
                policy, inherited = await policy_in_force(self._store, key, record)
                frontier.set_policy(key, policy)
                frontier.hosts[key].inherited_policy = inherited
            own = policy_of_record(record)
            for host in list(frontier.hosts.values()):  # subdomains without their own policy
                if domain_host_key(host.host_key) == key and (
                        host.inherited_policy or host.policy.is_default()):
                    frontier.set_policy(host.host_key, own)
                    host.inherited_policy = not own.is_default()

    # ---- the refill ----------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A refill is under way."""
        return self._task is not None

    @property
    def held_back(self) -> bool:
        """Hand-backs a store error left owed (their rows are due earlier in the store
        than this worker means them to be)."""
        return self._releaser.owed > 0

    def due(self, now: float, last: float) -> bool:
        """Time for a refill: none runs, none failed just now, and the interval since
        ``last`` has passed. Each refill is a store round trip with a cost of its own
        besides the rows; with ``REFILL_AMPLE`` times the concurrency queued in memory,
        one a second brings what became due at a quarter of that cost."""
        ample = self._frontier.queued >= REFILL_AMPLE * self._config.concurrency
        interval = REFILL_CALM if ample else REFILL_EVERY
        return self._task is None and now - last >= interval and now >= self._retry_at

    def start(self, now: float) -> asyncio.Task[None]:
        """Run a refill as a task of its own."""
        task = asyncio.create_task(self._refill_beside(now))
        self._task = task
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        if self._task is task:
            self._task = None
        self._wake()
        if not task.cancelled() and task.exception() is not None:
            log.error("refill task failed", exc_info=task.exception())

    async def settle(self) -> None:
        """Wait for the refill under way, if any (without cancelling it if we are)."""
        task = self._task
        if task is not None:
            await asyncio.wait({task})

    async def _refill_beside(self, now: float) -> None:
        try:
            await self._refill(now)
        except StoreError as exc:
            # a lost connection, a restarting server: the refill wrote nothing, and the
            # next one reads again
            self._metrics.store_pauses.inc()
            log_event(log, logging.ERROR, "store_pause",
                      "store unavailable for a refill, retrying in %.0f s: %s",
                      STORE_RETRY, exc, reason=str(exc))
            self._retry_at = now + STORE_RETRY

    async def _refill(self, now: float) -> None:
        config, frontier, shards = self._config, self._frontier, self._shards.shards
        room = config.memory_window - frontier.queued
        if room < config.memory_window // 2 or not shards:
            return
        # hand-backs still owed first: one landing after this read would move a row that
        # the read has just handed to the frontier again
        await self._releaser.release([])
        skip = self.held_hosts()  # before the read: see held_hosts
        epochs = {s: frontier.epochs[s] for s in shards if s in frontier.epochs}
        due = await self._store.read_due(shards, now, min(room, REFILL_MAX_ROWS),
                                         config.host_window, skip_hosts=skip, epochs=epochs)
        # the rows stay QUEUED in the store: a store error from here drops them, and the
        # next refill reads them again
        await planning.prepare(self._store, self._processor.planner, due)
        if due:  # scope rules stored with these rows' seeds apply before their links
            await self.apply_scope_rules()
        await self._register_hosts(due)
        frontier.add(due)
        frontier.forget_idle_hosts(keep=max(1000, config.memory_window // 4))

    def held_hosts(self) -> set[str]:
        """Every host this worker holds a row of: URLs queued in the frontier or denied
        there, a fetch in flight, a result waiting for its commit or in the commit under
        way. The refill reads rows without marking
        them (docs/scale-out.md, "The refill that writes nothing"), so these hosts are
        its ``skip_hosts``: a row the worker holds is never read a second time. The set
        is taken before the read, and a host with a result leaves it only once the
        store has acknowledged that commit, so a read whose snapshot predates a commit
        skips that host instead of returning the row as it was before.

        A host in a long back-off (or with its daily budget spent) is not in it: a row of
        it read again goes back at once, postponed to when the wait ends (releaser.py),
        so the crawl's end sees it due then. Skipped instead, the rows of such a host
        that links added meanwhile stayed due now, and a one-shot crawl waited the
        back-off out."""
        held = self._frontier.holding_hosts()
        held.update(lease.host_key for lease in self._in_flight.leases())
        held.update(self._committer.held_hosts())
        return held

    async def _register_hosts(self, due: list[DueUrl]) -> None:
        """Register the hosts of ``due`` not known yet: robots copy, policy, day counts and
        politeness clocks from the store (none is requested before this is done)."""
        frontier, store = self._frontier, self._store
        new_hosts = {d.host_key: d.shard for d in due if not frontier.knows_host(d.host_key)}
        if not new_hosts:
            return
        # every store read first: a failure registers nothing, and the retry does it all
        found = []
        for host_key, shard in new_hosts.items():
            record = await store.load_host(host_key)
            policy, inherited = await policy_in_force(store, host_key, record)
            found.append((host_key, shard, record, policy, inherited))
        budgeted = [key for key, _, _, policy, _ in found if policy.max_pages is not None]
        counts = await store.load_day_counts(budgeted) if budgeted else {}
        clocks = await self._shards.load_host_clocks(list(new_hosts))
        await self._shards.restore_trap_stats(list(new_hosts))  # before any link is read
        for host_key, shard, record, policy, inherited in found:
            ip = await self._resolve_ip(host_key) if self._resolve_ip is not None else None
            robots = (await parse_off_loop(record.robots_body, self._agent)
                      if record is not None and record.robots_body is not None else None)
            frontier.register_host(host_key, shard, record, ip, robots)
            if inherited:  # the registrable domain's policy covers this subdomain
                frontier.set_policy(host_key, policy)
                frontier.hosts[host_key].inherited_policy = True
        for count in counts.values():  # max-pages-per-day windows continue across restarts
            frontier.restore_day_pages(count.key, count.day_start, count.used)
        self._shards.restore_host_clocks(list(new_hosts), clocks)  # before any request
