"""Shards that come and go while a worker runs, as a mixin of :class:`~courtier.worker.Worker`.

The :class:`~courtier.cluster.coordinator.ShardCoordinator` decides; the worker
loop applies its :class:`~courtier.cluster.coordinator.ShardChanges` at the top of
each turn:

* **gained** — the shard's SCHEDULED rows go back to QUEUED (fenced by the new
  epoch), it joins the refill, and each of its hosts gets its politeness clock
  from the store (:mod:`courtier.cluster.host_clocks`) when the refill first
  registers it, before any request to it;
* **lost** (another owner holds it now) — its queued URLs are dropped from memory
  without a write (the new owner resets them), its fetches are cancelled, and
  their late commits are rejected by the store as stale;
* **handover** (graceful) — a drain: no new leases of the shard, its queued URLs
  released, fetches in flight finish (cancelled after ``drain_timeout``), the
  batch committed, each host's clock saved, the hosts forgotten, then the lease
  released. The coordinator renews a draining lease until it is released.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from typing import TYPE_CHECKING

from courtier.clock import Clock
from courtier.cluster.coordinator import ShardChanges, ShardCoordinator
from courtier.cluster.host_clocks import clock_of, restore_clock
from courtier.cluster.shard_state import ShardStateKeeper
from courtier.cluster.timed_store import STORE_CALL_TIMEOUT
from courtier.errors import StoreError
from courtier.frontier.lease import Lease
from courtier.frontier.scheduler import Frontier
from courtier.metrics import CrawlMetrics
from courtier.store.base import DueUrl, Store
from courtier.store.cluster import HostClock

#: seconds a single process (no coordinator) leases its shards for; renewed every third
SHARD_LEASE = 60.0

log = logging.getLogger("courtier.worker")

#: seconds a leaving worker waits for the coordinator's round under way: its store calls
#: (heartbeat, then cluster view) are bounded by STORE_CALL_TIMEOUT each
ROUNDS_END_WAIT = 2 * STORE_CALL_TIMEOUT + 5.0


class ShardSteps:
    """Dynamic shards; the attributes are the worker's (see :class:`courtier.worker.Worker`)."""

    store: Store
    clock: Clock
    frontier: Frontier
    metrics: CrawlMetrics
    shards: list[int]
    owner: str
    coordinator: ShardCoordinator | None
    _task_leases: dict[asyncio.Task[None], Lease]
    #: shard → (local time it was gained, taken over from an expired owner)
    _gained: dict[int, tuple[float, bool]]
    #: shard → local time its drain began
    _draining: dict[int, float]
    #: lost shards whose hosts are forgotten once their cancelled fetches have ended
    _forgetting: set[int]
    #: host → local time a drain cancelled its fetch
    _drain_cancels: dict[str, float]
    #: drained shards whose release failed (store error): retried each turn
    _unreleased_shards: set[int]
    drain_timeout: float
    #: trap statistics and near-duplicate index of the shards (None without a coordinator)
    shard_state: ShardStateKeeper | None

    if TYPE_CHECKING:  # the worker's (worker.py, worker_refill.py); no stub may shadow them
        def request_stop(self, reason: str = "stopped") -> None: ...

        async def _flush(self) -> None: ...

        async def _release_items(self, items: list[tuple[DueUrl, float]]) -> None: ...

    # ---- applying the coordinator's decisions ------------------------------------------------

    async def _apply_shard_changes(self) -> None:
        if self.coordinator is None:
            return
        changes = self.coordinator.take_changes()
        if changes:
            await self._apply(changes)
        if self._unreleased_shards:
            await self.coordinator.release(self._unreleased_shards)
            self._unreleased_shards = set()
        keeper = self.shard_state
        if keeper is not None:
            await self._shard_state_step(keeper)
        if self._draining:
            await self._progress_drains()
        if self._forgetting and not self._tasks_of(self._forgetting):
            self.frontier.forget_shards(self._forgetting)
            self._forgetting.clear()

    async def _apply(self, changes: ShardChanges) -> None:
        if changes.lost:
            self._drop_lost(changes.lost)
            changes.lost = set()
        if changes.gained:
            now = self.clock.now()
            try:
                await self.store.reset_scheduled(sorted(changes.gained), changes.gained)
            except StoreError:
                assert self.coordinator is not None
                self.coordinator.requeue(changes)  # applied on a later turn
                raise
            for shard, epoch in changes.gained.items():
                self.frontier.epochs[shard] = epoch
                self._gained[shard] = (now, shard in changes.taken_over)
                kind = "takeover" if shard in changes.taken_over else "gained"
                self.metrics.shard_moves.labels(kind).inc()
            if self.shard_state is None:
                self.shards = sorted(set(self.shards) | set(changes.gained))
            else:  # they join the refill once their near-duplicate pages are indexed
                self.shard_state.gained(changes.gained)
        for shard in sorted(changes.handover):
            if shard in self.frontier.epochs and shard not in self._draining:
                self._start_drain(shard)
        if changes.handover:
            released = self.frontier.drain_shards(changes.handover)
            await self._release_items(released)

    async def _renew(self, now: float) -> None:
        """A single process renews its own leases (a coordinator renews a cluster's)."""
        if not self.frontier.epochs:
            return
        held = await self.store.renew_shards(self.owner, self.frontier.epochs, now, SHARD_LEASE)
        lost = set(self.frontier.epochs) - held
        if lost:
            self._drop_lost(lost)  # those shards only: the others go on
            if not self.shards:
                self.request_stop("lost shard leases")

    def _drop_lost(self, shards: Collection[int]) -> None:
        lost = set(shards)
        self.metrics.shard_leases_lost.inc(len(lost))
        log.warning("lost the lease of %d shards to another worker: dropping them", len(lost))
        for shard in lost:
            self.frontier.epochs.pop(shard, None)
            self._draining.pop(shard, None)
            self._gained.pop(shard, None)
        if self.shard_state is not None:
            self.shard_state.dropped(lost)
        self.shards = [s for s in self.shards if s not in lost]
        self.frontier.drain_shards(lost)  # not released: the new owner resets them
        for task in self._tasks_of(lost):
            if not task.done():
                self.metrics.fenced_requests.inc()
            task.cancel()
        self._forgetting |= lost

    def _start_drain(self, shard: int) -> None:
        self._draining[shard] = self.clock.now()
        if self.shard_state is not None:
            self.shard_state.dropped({shard})
        self.shards = [s for s in self.shards if s != shard]

    def _tasks_of(self, shards: Collection[int]) -> list[asyncio.Task[None]]:
        return [task for task, lease in self._task_leases.items()
                if self.frontier.hosts.get(lease.host_key) is not None
                and self.frontier.hosts[lease.host_key].shard in shards]

    async def _progress_drains(self) -> None:
        now = self.clock.now()
        busy = self._tasks_of(self._draining)
        if busy:
            late = {s for s, began in self._draining.items() if now - began >= self.drain_timeout}
            for task in self._tasks_of(late):
                # the request may have reached the server: its end is counted as now
                self._drain_cancels[self._task_leases[task].host_key] = now
                task.cancel()
            return
        shards = set(self._draining)
        await self._flush()  # the drained fetches' results, under the epoch still held
        await self._release_items(self.frontier.take_released())
        hosts = self.frontier.forget_shards(shards)
        await self._release_items(self.frontier.take_released())
        coordinator = self.coordinator
        assert coordinator is not None
        clocks = []
        for host in hosts:
            delay = self.frontier.delay_for(host)
            cancelled_at = self._drain_cancels.pop(host.host_key, None)
            if cancelled_at is not None:
                host.next_allowed_at = max(host.next_allowed_at, cancelled_at + delay)
            clocks.append(clock_of(host, delay, coordinator.offset + coordinator.offset_error))
        try:
            if clocks:
                await self.store.save_host_clocks(clocks)
        except StoreError as exc:
            # without their clocks the next owner waits one delay per host (see
            # host_clocks.restore_clock: no clock → the restorer's own arithmetic)
            log.warning("could not save %d host clocks of a handover: %s", len(clocks), exc)
        if self.shard_state is not None:
            await self.shard_state.hand_over(shards)  # before the release, like the clocks
        try:
            await coordinator.release(shards)
        except StoreError:
            self._unreleased_shards |= shards  # renewed meanwhile; released on a later turn
        for shard in shards:
            self._draining.pop(shard, None)
            self._gained.pop(shard, None)
            self.frontier.epochs.pop(shard, None)
        self.metrics.shard_moves.labels("handover").inc(len(shards))
        log.info("handed over %d shards (%d host clocks saved)", len(shards), len(clocks))

    async def _end_rounds(self, rounds: asyncio.Task[None]) -> None:
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

    async def _hand_over_all(self, cut: Collection[str]) -> None:
        """Leaving: save every host's clock (``cut``: hosts whose fetch was cancelled just
        now), release every lease and leave the membership. Store trouble is logged:
        the leases then expire and the next owners treat the shards as taken over."""
        coordinator = self.coordinator
        assert coordinator is not None
        now = self.clock.now()
        hosts = self.frontier.forget_shards(set(coordinator.held))
        clocks = []
        for host in hosts:
            delay = self.frontier.delay_for(host)
            if host.host_key in cut:
                host.next_allowed_at = max(host.next_allowed_at, now + delay)
            clocks.append(clock_of(host, delay, coordinator.offset + coordinator.offset_error))
        try:
            if clocks:
                await self.store.save_host_clocks(clocks)
        except StoreError as exc:
            log.warning("could not save %d host clocks on leaving: %s", len(clocks), exc)
        if self.shard_state is not None:
            await self.shard_state.hand_over(set(coordinator.held))
        await coordinator.stop(leave=True)

    async def _shard_state_step(self, keeper: ShardStateKeeper) -> None:
        """Gained shards join the refill once their near-duplicate index is rebuilt; the
        trap statistics of held shards are saved every few seconds."""
        if keeper.rebuilding:
            ready = await keeper.rebuild()
            ready = {s for s in ready if s in self.frontier.epochs and s not in self._draining}
            if ready:
                self.shards = sorted(set(self.shards) | ready)
        held = set(self.frontier.epochs) - set(self._draining)
        await keeper.tick(held)

    async def _restore_trap_stats(self, host_keys: list[str]) -> None:
        if self.shard_state is not None:
            await self.shard_state.restore_hosts(host_keys)

    # ---- host clocks of gained shards ---------------------------------------------------------

    async def _load_host_clocks(self, host_keys: list[str]) -> dict[str, HostClock]:
        if self.coordinator is None or not host_keys:
            return {}
        return await self.store.load_host_clocks(host_keys)

    def _restore_host_clocks(self, host_keys: list[str], clocks: dict[str, HostClock]) -> None:
        """Newly registered hosts continue the politeness clocks saved by earlier owners."""
        coordinator = self.coordinator
        if coordinator is None:
            return
        for key in host_keys:
            host = self.frontier.hosts.get(key)
            if host is None:
                continue
            gained_at, taken_over = self._gained.get(host.shard, (self.clock.now(), True))
            restore_clock(host, clocks.get(key), coordinator.offset, coordinator.offset_error,
                          gained_at, taken_over, self.frontier.delay_for(host))
