"""The shards one worker holds, and how they come and go (:class:`ShardKeeper`).

Owns: the shards this worker refills from (``shards``), when each held shard was gained
and whether it was taken over, the shards being drained for a graceful handover, lost
shards whose hosts are forgotten once their cancelled fetches have ended, hosts whose
fetch a drain cancelled, drained shards whose release failed; and, in a cluster, the
:class:`~courtier.cluster.coordinator.ShardCoordinator` that decides and the
:class:`~courtier.cluster.shard_state.ShardStateKeeper` that moves trap statistics and
near-duplicate pages with the shards.

Alone (no coordinator) the worker leases every shard at start (:meth:`acquire_alone`)
and renews them (:meth:`renew`); a shard whose lease it loses is dropped, not the whole
crawl. Alone too, the shards join the refill once the near-duplicate pages of earlier
runs are indexed, trap statistics are saved every few seconds and on leaving
(:meth:`save_alone`), and restored when the refill registers a host: a restart on the
same store continues where the last run stopped. In a cluster the loop applies the
coordinator's changes at the top of each turn (:meth:`apply_changes`):

* **gained** — rows an older version left SCHEDULED in it go back to QUEUED (fenced
  by the new epoch; the refill marks nothing since it reads, crawl/refiller.py), it
  joins the refill (once its near-duplicate pages are indexed), and each of its servers
  (host names: every scheme and port of a name is in one shard) gets its politeness
  clock from the store (:mod:`courtier.cluster.host_clocks`) when the refill first
  registers one of its hosts, before any request to it;
* **lost** (another owner holds it now) — its queued URLs are dropped from memory
  without a write (they are QUEUED: the new owner reads them), its fetches are
  cancelled, and their late commits are rejected by the store as stale; its hosts are
  forgotten once those fetches have ended. A shard **regained** before then (lost and
  gained in one round, or a round later) joins the refill only after that forgetting:
  no host of it is registered meanwhile, so the forgetting never drops the queue or the
  politeness clock of a host of the new term, and the new term's hosts restore their
  clocks from the store like any gained shard's;
* **handover** (graceful) — a drain: no new leases of the shard, its queued URLs
  released, fetches in flight finish (cancelled after ``drain_timeout``), the
  batch committed, each server's clock saved, the hosts forgotten, then the lease
  released. The coordinator renews a draining lease until it is released.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from courtier.cluster.coordinator import ShardChanges, ShardCoordinator
from courtier.cluster.host_clocks import clock_of, restore_clock
from courtier.cluster.shard_state import ShardStateKeeper
from courtier.cluster.timed_store import STORE_CALL_TIMEOUT
from courtier.core.clock import Clock
from courtier.core.errors import StoreError
from courtier.core.logs import log_event
from courtier.core.urls import SHARD_COUNT, server_of
from courtier.crawl.committer import Committer
from courtier.crawl.in_flight import InFlight
from courtier.crawl.known_loader import KnownUrlsLoader
from courtier.crawl.metrics import CrawlMetrics
from courtier.crawl.releaser import Releaser
from courtier.frontier.host import HostState
from courtier.frontier.lease import Lease
from courtier.frontier.scheduler import Frontier
from courtier.store.base import Store
from courtier.store.cluster import HostClock

log = logging.getLogger("courtier.worker")

#: seconds a single process (no coordinator) leases its shards for; renewed every third
SHARD_LEASE = 60.0

#: seconds a leaving worker waits for the coordinator's round under way: its store calls
#: (heartbeat, then cluster view) are bounded by STORE_CALL_TIMEOUT each
ROUNDS_END_WAIT = 2 * STORE_CALL_TIMEOUT + 5.0


class ShardKeeper:
    """The held shards: leased alone, or moved by a coordinator."""

    def __init__(self, store: Store, clock: Clock, frontier: Frontier, metrics: CrawlMetrics,
                 in_flight: InFlight, committer: Committer, releaser: Releaser,
                 request_stop: Callable[[str], None], owner: str,
                 coordinator: ShardCoordinator | None, shard_state: ShardStateKeeper | None,
                 shards: Sequence[int] | None, drain_timeout: float,
                 known_loader: KnownUrlsLoader | None = None) -> None:
        self._store = store
        self._clock = clock
        self._frontier = frontier
        self._metrics = metrics
        self._in_flight = in_flight
        self._committer = committer
        self._releaser = releaser
        self._request_stop = request_stop
        self._owner = owner
        self.coordinator = coordinator
        #: trap statistics and near-duplicate index of the shards, kept in the store
        self.shard_state = shard_state
        #: shards this worker refills from (held, not draining); the coordinator's in a cluster
        self.shards: list[int] = [] if coordinator is not None else (
            list(range(SHARD_COUNT)) if shards is None else list(shards))
        #: a drain cancels fetches still running after this (before the lease is at risk)
        self.drain_timeout = drain_timeout
        #: shard → (local time it was gained, taken over from an expired owner)
        self._gained: dict[int, tuple[float, bool]] = {}
        #: shard → local time its drain began
        self._draining: dict[int, float] = {}
        #: lost shards whose hosts are forgotten once their cancelled fetches have ended
        self._forgetting: set[int] = set()
        #: shards gained again while their loss is being forgotten: they join the refill
        #: (their state read first) once it is done
        self._regained: set[int] = set()
        #: hosts whose fetch a drain cancelled (their end is counted when the drain completes)
        self._drain_cancels: set[str] = set()
        #: drained shards whose release failed (store error): retried each turn
        self._unreleased: set[int] = set()
        #: streams the known URL keys of gained shards into the owner-local set
        self.known_loader = known_loader
        #: gained shards that have not joined the refill yet (their near-duplicate pages
        #: or their known URL keys are still being read)
        self._joining: set[int] = set()

    def held_share(self) -> float:
        """The shards this worker holds a lease on (refilling, draining or waiting for
        their near-duplicate pages), as a share of all shards: its part of the crawl's
        daily budget (frontier/budget.py). A shard is dropped from it when its release
        returns or its loss is learnt, and joins it when its gain is applied."""
        return len(self._frontier.epochs) / SHARD_COUNT

    @property
    def draining(self) -> bool:
        """A graceful handover is under way."""
        return bool(self._draining)

    @property
    def rebuilding(self) -> bool:
        """Gained shards wait for their near-duplicate pages or their known URL keys
        (or, regained, for the forgetting of their loss) before they join the refill."""
        return bool(self._joining or self._regained)

    # ---- alone ---------------------------------------------------------------------------

    async def acquire_alone(self, now: float) -> None:
        """A single process leases its shards and resets what an earlier run of an older
        version left SCHEDULED in them."""
        epochs = await self._store.acquire_shards(self._owner, self.shards, now, SHARD_LEASE)
        self._frontier.epochs = dict(epochs)
        recovered = await self._store.reset_scheduled(sorted(epochs), epochs)
        self._metrics.re_lease("recovered", recovered)
        self.shards = []
        self._gain(epochs)  # they join the refill once their state is read

    async def renew(self, now: float) -> None:
        """A single process renews its own leases (a coordinator renews a cluster's)."""
        if not self._frontier.epochs:
            return
        held = await self._store.renew_shards(self._owner, self._frontier.epochs, now,
                                              SHARD_LEASE)
        lost = set(self._frontier.epochs) - held
        if lost:
            self._drop_lost(lost)  # those shards only: the others go on
            if not self.shards:
                self._request_stop("lost shard leases")

    # ---- applying the coordinator's decisions ------------------------------------------------

    async def apply_changes(self) -> None:
        """The coordinator's decisions since the last turn, drains and forgetting; alone,
        the near-duplicate index's rebuild and the trap statistics' saves."""
        if self.coordinator is None:
            await self._prepare_step()
            return
        changes = self.coordinator.take_changes()
        if changes:
            await self._apply(changes)
        if self._unreleased:
            await self.coordinator.release(self._unreleased)
            self._unreleased = set()
        if self._forgetting:
            self._forget_lost()  # before the drains: a regained shard may drain meanwhile
        await self._prepare_step()
        if self._draining:
            await self._progress_drains()

    async def _apply(self, changes: ShardChanges) -> None:
        if changes.lost:
            self._drop_lost(changes.lost)
            changes.lost = set()
        if changes.gained:
            now = self._clock.now()
            try:
                recovered = await self._store.reset_scheduled(sorted(changes.gained),
                                                               changes.gained)
            except StoreError:
                assert self.coordinator is not None
                self.coordinator.requeue(changes)  # applied on a later turn
                raise
            self._metrics.re_lease("recovered", recovered)
            for shard, epoch in changes.gained.items():
                self._frontier.epochs[shard] = epoch
                self._gained[shard] = (now, shard in changes.taken_over)
                kind = "takeover" if shard in changes.taken_over else "gained"
                self._metrics.shard_moves.labels(kind).inc()
            self._gain(changes.gained)  # they join the refill once their state is read
        for shard in sorted(changes.handover):
            if shard in self._frontier.epochs and shard not in self._draining:
                self._start_drain(shard)
        if changes.handover:
            released = self._frontier.drain_shards(changes.handover)
            await self._releaser.release(released)

    def _drop_lost(self, shards: Collection[int]) -> None:
        lost = set(shards)
        self._metrics.shard_leases_lost.inc(len(lost))
        log_event(log, logging.WARNING, "shards_dropped",
                  "lost the lease of %d shards to another worker: dropping them", len(lost),
                  shards=sorted(lost), worker=self._owner)
        for shard in lost:
            self._frontier.epochs.pop(shard, None)
            self._draining.pop(shard, None)
            self._gained.pop(shard, None)
        self._regained -= lost  # lost again before it joined: its first loss goes on
        self._forget_state(lost)
        self.shards = [s for s in self.shards if s not in lost]
        self._frontier.drain_shards(lost)  # not released: the new owner reads them
        for task, _ in self._fetches_of(lost):
            if not task.done():
                self._metrics.fenced_requests.inc()
            task.cancel()
        self._forgetting |= lost

    def _forget_lost(self) -> None:
        """Lost shards whose cancelled fetches have all ended: their hosts are dropped
        (nothing of them was saved: the new owner restores what it saved itself), and
        those regained meanwhile join now, with hosts registered afresh."""
        busy = {self._shard_of(lease.host_key) for _, lease in self._fetches_of(self._forgetting)}
        done = self._forgetting - busy
        if not done:
            return
        self._frontier.forget_shards(done)
        self._forgetting -= done
        regained = self._regained & done
        self._regained -= regained
        if regained:
            self._gain(regained)

    def _start_drain(self, shard: int) -> None:
        self._draining[shard] = self._clock.now()
        self._regained.discard(shard)  # it never joined: its drain waits for the old fetches
        # its links go to the store from now on (the next owner reads its keys there)
        self._forget_state({shard})
        self.shards = [s for s in self.shards if s != shard]

    def _shard_of(self, host_key: str) -> int | None:
        host = self._frontier.hosts.get(host_key)
        return None if host is None else host.shard

    def _fetches_of(self, shards: Collection[int]) -> list[tuple[asyncio.Task[None], Lease]]:
        return self._in_flight.of_hosts(self._shard_of, shards)

    async def _progress_drains(self) -> None:
        now = self._clock.now()
        busy = self._fetches_of(self._draining)
        if busy:
            late = {s for s, began in self._draining.items() if now - began >= self.drain_timeout}
            cutting = 0
            for task, lease in self._fetches_of(late):
                # the request may have reached the server: its end is counted when the
                # drain completes (below), after the cancelled fetch closed its connection
                self._drain_cancels.add(lease.host_key)
                if not task.done() and not task.cancelling():
                    cutting += 1  # counted and logged once a request
                task.cancel()
            if cutting:
                self._metrics.drain_cancelled_requests.inc(cutting)
                log_event(log, logging.WARNING, "drain_cancelled",
                          "handover drain timed out: cancelled %d requests after %.1f s;"
                          " the new owner fetches them again", cutting, self.drain_timeout,
                          shards=sorted(late), worker=self._owner)
            return
        shards = set(self._draining)
        await self._committer.flush()  # the drained fetches' results, under the epoch held
        await self._releaser.release_returned()
        hosts = self._frontier.forget_shards(shards)
        await self._releaser.release_returned()
        coordinator = self.coordinator
        assert coordinator is not None
        # every cut fetch has ended and closed its connection by now: the server saw those
        # requests end before this moment, not before the cancel (a loaded loop takes a
        # while to unwind a cancelled request; the server then saw its end that much
        # later than the cancel, and a clock counted from the cancel was short by it)
        ended = self._clock.now()
        cut = {h.host_key: ended for h in hosts if h.host_key in self._drain_cancels}
        self._drain_cancels.difference_update(cut)
        saved = await self._save_clocks(hosts, cut, "of a handover")
        if self.shard_state is not None:
            await self.shard_state.hand_over(shards)  # before the release, like the clocks
        try:
            await coordinator.release(shards)
        except StoreError:
            self._unreleased |= shards  # renewed meanwhile; released on a later turn
        for shard in shards:
            self._draining.pop(shard, None)
            self._gained.pop(shard, None)
            self._frontier.epochs.pop(shard, None)
        self._metrics.shard_moves.labels("handover").inc(len(shards))
        log_event(log, logging.INFO, "handover_done",
                  "handed over %d shards (%d host clocks saved)", len(shards), saved,
                  shards=sorted(shards), worker=self._owner)

    def _gain(self, shards: Collection[int]) -> None:
        """Gained shards: their near-duplicate pages and known URL keys are read first;
        one lost earlier waits until the hosts of that loss are forgotten."""
        regained = self._forgetting.intersection(shards)
        if regained:
            self._regained |= regained
            shards = set(shards) - regained
        if self.shard_state is None and self.known_loader is None:
            self.shards = sorted(set(self.shards) | set(shards))
            return
        self._joining |= set(shards)
        if self.shard_state is not None:
            self.shard_state.gained(shards)
        if self.known_loader is not None:
            self.known_loader.gained(sorted(shards))

    def _forget_state(self, shards: Collection[int]) -> None:
        """Shards lost or being handed over: their waiting reads end, their keys go."""
        self._joining -= set(shards)
        if self.shard_state is not None:
            self.shard_state.dropped(shards)
        if self.known_loader is not None:
            self.known_loader.dropped(shards)

    async def _prepare_step(self) -> None:
        """Gained shards join the refill once their near-duplicate index is rebuilt and
        their known URL keys are loaded (each read in bounded steps, one per turn); the
        trap statistics of held shards are saved every few seconds."""
        keeper = self.shard_state
        loader = self.known_loader
        if keeper is not None and keeper.rebuilding:
            await keeper.rebuild()
        if loader is not None and loader.loading:
            await loader.step()
        if self._joining:
            waiting = set(keeper.rebuilding) if keeper is not None else set()
            if loader is not None:
                waiting |= set(loader.known.loading())
            ready = {s for s in self._joining - waiting
                     if s in self._frontier.epochs and s not in self._draining}
            self._joining &= waiting  # the others joined, or are held no more
            if ready:
                self.shards = sorted(set(self.shards) | ready)
        if keeper is not None:
            held = set(self._frontier.epochs) - set(self._draining)
            await keeper.tick(held)

    # ---- leaving -----------------------------------------------------------------------------

    async def end_rounds(self, rounds: asyncio.Task[None]) -> None:
        """End the coordinator's rounds task before leaving: halted first (no further
        round), then cancelled. A lost cancellation (see ``ShardCoordinator.halt``) costs
        at most the round under way; the wait is bounded all the same, and a round still
        running past it is left to end by itself."""
        coordinator = self.coordinator
        assert coordinator is not None
        coordinator.halt()
        rounds.cancel()
        await asyncio.wait({rounds}, timeout=ROUNDS_END_WAIT)
        if not rounds.done():
            log.error("the shard coordinator's round did not end within %.0f s of the stop;"
                      " leaving without it", ROUNDS_END_WAIT)
        elif not rounds.cancelled() and rounds.exception() is not None:
            log.error("the shard coordinator failed", exc_info=rounds.exception())

    async def hand_over_all(self, cut: Collection[str]) -> None:
        """Leaving: save every host's clock (``cut``: hosts whose fetch was cancelled just
        now), release every lease and leave the membership. Store trouble is logged:
        the leases then expire and the next owners treat the shards as taken over."""
        coordinator = self.coordinator
        assert coordinator is not None
        now = self._clock.now()
        hosts = self._frontier.forget_shards(set(coordinator.held))
        await self._save_clocks(hosts, dict.fromkeys(cut, now), "on leaving")
        if self.shard_state is not None:
            await self.shard_state.hand_over(set(coordinator.held))
        await coordinator.stop(leave=True)

    async def save_alone(self) -> None:
        """Leaving alone: save the trap statistics changed since the last periodic save (the
        next run on this store restores them). A store error is logged: the next run then
        continues from the last periodic save, as after a crash."""
        keeper = self.shard_state
        if keeper is None:
            return
        try:
            await keeper.save_hosts(lambda _: True)
        except StoreError as exc:
            log_event(log, logging.WARNING, "trap_state_save_failed",
                      "could not save the trap statistics on leaving: %s", exc, reason=str(exc))

    async def _save_clocks(self, hosts: Iterable[HostState], cut_at: Mapping[str, float],
                           when: str) -> int:
        """Save the politeness clock of each server (host name) whose hosts leave this
        worker, once, under its name, with the largest delay any of its hosts has in force
        (``cut_at``: hosts whose fetch was cancelled, and when: the request may have
        reached the server, so its end counts as then). A store error is logged: without
        their clocks the next owner waits one delay per server (host_clocks.restore_clock).
        Returns the count of clocks."""
        coordinator = self.coordinator
        assert coordinator is not None
        servers: dict[str, tuple[HostState, float]] = {}
        for host in hosts:
            delay = self._frontier.delay_for(host)
            cancelled_at = cut_at.get(host.host_key)
            if cancelled_at is not None:
                host.next_allowed_at = max(host.next_allowed_at, cancelled_at + delay)
            seen = servers.get(host.server.name)
            servers[host.server.name] = (host, delay if seen is None else max(delay, seen[1]))
        offset = coordinator.offset + coordinator.offset_error
        clocks = [clock_of(host, delay, offset) for host, delay in servers.values()]
        try:
            if clocks:
                await self._store.save_host_clocks(clocks)
        except StoreError as exc:
            log.warning("could not save %d host clocks %s: %s", len(clocks), when, exc)
        return len(clocks)

    # ---- what the refill asks when it registers new hosts ----------------------------------

    async def restore_trap_stats(self, host_keys: list[str]) -> None:
        if self.shard_state is not None:
            await self.shard_state.restore_hosts(host_keys)

    async def load_host_clocks(self, host_keys: list[str]) -> dict[str, HostClock]:
        """The clocks saved for the servers (host names) of ``host_keys``, by name."""
        if self.coordinator is None or not host_keys:
            return {}
        return await self._store.load_host_clocks(sorted({server_of(k) for k in host_keys}))

    def restore_host_clocks(self, host_keys: list[str], clocks: dict[str, HostClock]) -> None:
        """Newly registered hosts continue the politeness clocks saved by earlier owners:
        each server's once, with the largest delay its new hosts have in force, and only
        while no request went out against it here (a live clock is newer than any saved)."""
        coordinator = self.coordinator
        if coordinator is None:
            return
        servers: dict[str, tuple[HostState, float]] = {}
        for key in host_keys:
            host = self._frontier.hosts.get(key)
            if host is None or host.server.live:
                continue
            delay = self._frontier.delay_for(host)
            seen = servers.get(host.server.name)
            servers[host.server.name] = (host, delay if seen is None else max(delay, seen[1]))
        for name, (host, delay) in servers.items():
            gained_at, taken_over = self._gained.get(host.shard, (self._clock.now(), True))
            restore_clock(host, clocks.get(name), coordinator.offset, coordinator.offset_error,
                          gained_at, taken_over, delay)
            host.server.live = True  # restored: a later sibling's registration keeps it
