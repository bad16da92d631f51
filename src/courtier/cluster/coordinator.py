"""One worker's shard coordinator: heartbeat, plan, acquire, hand over, self-fence.

A task of its own, so that a worker loop busy retrying a commit never delays a
renewal. Every ``renew_every`` seconds one round:

1. heartbeat, which is also the renewal (the worker's one row, store clock: its
   heartbeat and its lease, and so every shard it owns, in one write);
2. :meth:`~courtier.store.cluster.ClusterStore.cluster_view` — store now, live
   workers, leases — and :func:`~courtier.cluster.membership.plan_shards`; the
   shards the view shows under its id are the ones it holds (the view is read
   after the renewal, so none of them can change hands before that lease ends);
3. only when the plan wants a shard it does not own, one ``acquire_shards`` call
   for those: a round that takes nothing writes nothing more than its heartbeat
   (on Citus one reference-table row, one two-phase commit);
4. the differences become :class:`ShardChanges` for the worker loop: shards
   *gained* (with their epochs and whether they were taken over from a dead
   owner), shards *lost* (someone else holds them now: drop, never write), and
   shards to *hand over* (the rendezvous target is another live worker: drain,
   then :meth:`release`).

**Start-up.** Before its first lease a worker may wait, heartbeating every
``QUORUM_POLL`` seconds: for the workers started with it by one launcher, until its
start gate opens (:mod:`courtier.cluster.start_gate`, no deadline), then for
``expect_workers`` live workers (at most one lease TTL). Either way the workers that
start together plan over each other and split the shards without a first handover.

**The end.** While ``crawl_over`` says that the worker's last look found a one-shot
crawl over, a round acquires no shard the worker does not hold (it renews those it
does): the shards siblings release as they leave at the crawl's end hold nothing due
(:mod:`courtier.cluster.end_gate`).

**Self-fencing.** The renewal sent at local time ``t`` (the worker's monotonic
clock) that succeeded proves every lease it covered lasts until at least
``t + lease_seconds`` on any clock that does not run faster than ours by more
than ``max_drift``; :func:`~courtier.cluster.membership.fence_deadline` keeps a
margin. :meth:`may_start` is false from that deadline until the next successful
renewal, and a loop timer (independent of any await that may hang on the
store) calls ``on_fence`` at the deadline so the worker cuts its requests still
waiting for their answer (a fetch that has its answer finishes: crawl/worker.py).
A process stopped (SIGSTOP, a long GC pause, a suspended VM) and resumed later
finds :meth:`may_start` false on its first check, before any request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from courtier.cluster.membership import fence_deadline, live_weights, plan_shards
from courtier.cluster.start_gate import StartGate
from courtier.core.clock import Clock
from courtier.core.errors import StoreError
from courtier.core.logs import log_event
from courtier.core.urls import SHARD_COUNT
from courtier.store.base import Store
from courtier.store.cluster import ClusterView

log = logging.getLogger("courtier.cluster")

#: a worker silent this long and holding no lease is deleted from the membership
#: (``courtier cluster`` shows a dead worker until then)
DEAD_WORKER_KEPT = 86_400.0
#: rounds between two such clean-ups (about an hour at the default 5 s renewals)
PRUNE_EVERY_ROUNDS = 720
#: seconds between two rounds while the start-up quorum is awaited
QUORUM_POLL = 0.2


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    """Lease timing of one worker (``lease_seconds`` is ``--lease-ttl``)."""

    lease_seconds: float = 30.0
    weight: float = 1.0

    @property
    def renew_every(self) -> float:
        return self.lease_seconds / 6

    @property
    def fence_margin(self) -> float:
        """Time left, after the fence, to cancel fetches before the lease can expire."""
        return self.lease_seconds / 4

    @property
    def worker_ttl(self) -> float:
        """A worker whose heartbeat is older than this is no longer a target."""
        return self.lease_seconds


@dataclass(slots=True)
class ShardChanges:
    """What changed since the worker loop last asked (each shard in one list at most)."""

    gained: dict[int, int] = field(default_factory=dict)     # shard → epoch
    taken_over: set[int] = field(default_factory=set)  # from an expired owner or our crash
    lost: set[int] = field(default_factory=set)
    handover: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.gained or self.lost or self.handover)


class ShardCoordinator:
    """Membership and leases of one worker (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        worker_id: str,
        clock: Clock,
        settings: LeaseSettings,
        info: Mapping[str, Any] | None = None,
        shards: range = range(SHARD_COUNT),
        on_fence: Callable[[], None] | None = None,
        on_change: Callable[[], None] | None = None,
        expect_workers: int = 1,
        start_gate: StartGate | None = None,
        crawl_over: Callable[[], bool] | None = None,
    ) -> None:
        self.store = store
        self.worker_id = worker_id
        self.clock = clock
        self.settings = settings
        self.info = dict(info or {"host": socket.gethostname()})
        self.shards = shards
        self.on_fence = on_fence
        self.on_change = on_change
        #: shard → epoch of every lease this worker holds (draining ones included)
        self.held: dict[int, int] = {}
        #: shards being drained for a handover: renewed until released
        self.draining: set[int] = set()
        #: local time after which no request may start (-inf: nothing held yet)
        self.fence_at = float("-inf")
        #: store clock − local clock, and half the round trip it was measured over
        self.offset = 0.0
        self.offset_error = 0.0
        self.rounds = 0
        self.failed_rounds = 0
        self._changes = ShardChanges()
        self._timer: asyncio.TimerHandle | None = None
        self._stopping = False
        self._halted = asyncio.Event()  # wakes run() from its pause (halt)
        #: the slots an earlier process under this id held are freed before the first lease
        self._slots_freed = False
        #: start-up quorum: live workers awaited (until the local deadline) before the
        #: first acquisition; True while a round found fewer
        self.expect_workers = expect_workers
        self._quorum_until: float | None = None
        self.awaiting_quorum = False
        #: the workers started with this one (``crawl --workers N``): no shard before it
        #: opens, however long that takes (cluster/start_gate.py); None once passed
        self.start_gate = start_gate
        self._gate_waited_since: float | None = None
        #: True while the worker's last look found its one-shot crawl over: no free shard
        #: is taken then (cluster/end_gate.py); the worker sets it
        self.crawl_over = crawl_over

    # ---- what the worker asks ---------------------------------------------------------------

    def may_start(self) -> bool:
        """True while every lease held is provably unexpired (with the fencing margin)."""
        return self.clock.now() < self.fence_at

    def take_changes(self) -> ShardChanges:
        out, self._changes = self._changes, ShardChanges()
        return out

    def requeue(self, changes: ShardChanges) -> None:
        """Changes the worker could not apply (a store error): handed out again next time."""
        self._merge(changes)

    def to_store_time(self, local: float) -> float:
        return local + self.offset

    def to_local_time(self, store_time: float) -> float:
        return store_time - self.offset

    # ---- the rounds ----------------------------------------------------------------------

    async def run(self) -> None:
        """Rounds until :meth:`halt` or :meth:`stop`; a failed round is logged and retried
        sooner."""
        while not self._stopping:
            try:
                await self.round()
                pause = QUORUM_POLL if self.awaiting_quorum else self.settings.renew_every
            except StoreError as exc:
                self.failed_rounds += 1
                log_event(log, logging.WARNING, "store_unavailable",
                          "shard coordinator: store unavailable (%s); retrying", exc,
                          worker=self.worker_id, reason=str(exc))
                pause = min(1.0, self.settings.renew_every)
            if self._stopping:
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await self._halted.wait()

    def halt(self) -> None:
        """No round after the one under way, if any: :meth:`run` returns once it ends.

        The leaving worker halts the rounds before it cancels their task. A cancellation
        alone is not enough to end them: one that arrives as a store call returns can be
        lost (Python 3.11's ``asyncio.wait_for`` drops it; any library may), and the
        rounds then went on renewing the leases of a worker waiting for them to end."""
        self._stopping = True
        self._halted.set()

    async def round(self) -> ShardChanges:
        """One heartbeat + plan + acquire round; returns the changes it queued."""
        settings, store = self.settings, self.store
        if not self._slots_freed:
            freed = await store.release_ip_slots_of(self.worker_id)
            if freed:
                log_event(log, logging.WARNING, "ip_slots_freed",
                          "freed %d per-IP slots left by an earlier process of worker %s",
                          freed, self.worker_id, worker=self.worker_id, slots=freed)
            self._slots_freed = True
        sent = self.clock.now()
        # the heartbeat renews our worker lease, and with it every shard we own
        await store.heartbeat(self.worker_id, settings.weight, self.info, sent,
                              settings.lease_seconds)
        # asked before the view is read: a gate seen open means that every sibling's
        # heartbeat is in the store, and so in the view the plan is made from
        gated = self._awaiting_siblings()
        view = await store.cluster_view()
        received = self.clock.now()
        self.offset = view.now - (sent + received) / 2
        self.offset_error = (received - sent) / 2
        if gated or self._awaiting_quorum(view) or self._stopping:
            return ShardChanges()  # halted meanwhile: no new leases for a leaving worker
        plan = plan_shards(self.worker_id, view.worker_views(), view.lease_views(),
                           self.shards, view.now, settings.worker_ttl)
        leases = {lease.shard: lease for lease in view.leases}
        # every shard under our id, live or expired, held by this process or an earlier
        # one: the heartbeat renewed them all, and the view, read after it, is the truth
        # about them until that lease ends; one the plan gives another worker is handed
        # over below
        epochs = {lease.shard: lease.epoch for lease in view.leases
                  if lease.owner == self.worker_id}
        acquire = set(plan.acquire) - set(epochs)
        if self.crawl_over is not None and self.crawl_over():
            # what siblings leave at the crawl's end holds nothing due: not ours to take
            acquire &= set(self.held)
        renewed = sent
        if acquire:
            renewed = self.clock.now()
            epochs.update(await store.acquire_shards(self.worker_id, sorted(acquire),
                                                     renewed, settings.lease_seconds))
        self.rounds += 1
        if self.rounds % PRUNE_EVERY_ROUNDS == 1:
            await self._prune(view.now)
        changes = ShardChanges()
        for shard, epoch in epochs.items():
            if self.held.get(shard) == epoch:
                continue
            if shard in self.held:  # same shard, new term: someone held it in between
                changes.lost.add(shard)
            changes.gained[shard] = epoch
            lease = leases.get(shard)
            # held by someone else, or under our id by an earlier process (a crash: its
            # last requests are unknown); a released lease (owner None) left its clocks
            if lease is not None and lease.owner is not None and (
                    lease.owner != self.worker_id or shard not in self.held):
                changes.taken_over.add(shard)
        for shard in set(self.held) - set(epochs):
            changes.lost.add(shard)
            self.draining.discard(shard)
        self.held = dict(epochs)
        for shard in plan.handover:
            if shard in self.held and shard not in self.draining:
                self.draining.add(shard)
                changes.handover.add(shard)
        if self.held:
            self._fence_from(renewed)
        self._log_changes(changes)
        self._merge(changes)
        return changes

    def _log_changes(self, changes: ShardChanges) -> None:
        """One line per kind of change of a round (``shard`` when it concerns one)."""
        for event, level, shards, text in (
                ("shards_gained", logging.INFO, set(changes.gained), "gained %d shards"),
                ("shards_taken_over", logging.INFO, changes.taken_over,
                 "took over %d shards held by another worker or an earlier process"),
                ("shards_lost", logging.WARNING, changes.lost, "lost %d shards"),
                ("handover", logging.INFO, changes.handover,
                 "handing over %d shards to other workers")):
            if shards:
                ordered = sorted(shards)
                log_event(log, level, event, text, len(ordered), worker=self.worker_id,
                          shard=ordered[0] if len(ordered) == 1 else None, shards=ordered)

    def _awaiting_siblings(self) -> bool:
        """Before the first lease of a worker started with others by one launcher: until
        the start gate opens (each sibling registered or ended). No deadline: the
        launcher opens it (cluster/start_gate.py)."""
        gate = self.start_gate
        if gate is None:
            return False
        gate.registered()  # our heartbeat is in the store
        now = self.clock.now()
        if gate.is_open():
            self.start_gate = None  # passed once: never asked again
            if self._gate_waited_since is not None:
                waited = now - self._gate_waited_since
                log_event(log, logging.INFO, "siblings_registered",
                          "the workers started with this one have registered (or ended; "
                          "waited %.1f s): taking this worker's shards", waited,
                          worker=self.worker_id, seconds=waited)
            return False
        if self._gate_waited_since is None:
            self._gate_waited_since = now
            log_event(log, logging.INFO, "awaiting_siblings",
                      "waiting for the workers started with this one to register before "
                      "taking shards", worker=self.worker_id)
        self.awaiting_quorum = True
        return True

    def _awaiting_quorum(self, view: ClusterView) -> bool:
        """Before the first lease: fewer live workers than expected, and still time to wait
        for them (one lease TTL from the first round; workers already holding leases, or
        an earlier process of ours, end the wait since a handover is then due anyway)."""
        if self.expect_workers <= 1 or self.held or self._quorum_until == float("-inf"):
            self.awaiting_quorum = False
            return False
        now = self.clock.now()
        if self._quorum_until is None:
            self._quorum_until = now + self.settings.lease_seconds
        live = set(live_weights(view.worker_views(), view.now, self.settings.worker_ttl))
        held_by_others = any(lease.owner is not None and lease.expires_at > view.now
                             for lease in view.leases)
        waiting = (len(live | {self.worker_id}) < self.expect_workers
                   and now < self._quorum_until and not held_by_others)
        if not waiting:
            self._quorum_until = float("-inf")  # decided once: never wait again
        self.awaiting_quorum = waiting
        return waiting

    async def _prune(self, store_now: float) -> None:
        """Forget workers silent for a day that hold nothing (crashed, never back)."""
        gone = await self.store.prune_workers(DEAD_WORKER_KEPT, store_now)
        if gone:
            log_event(log, logging.INFO, "workers_forgotten",
                      "forgot %d workers silent for over %.0f h: %s", len(gone),
                      DEAD_WORKER_KEPT / 3600, ", ".join(gone[:10]), worker=self.worker_id,
                      workers=gone[:10])

    def _fence_from(self, renew_sent: float) -> None:
        settings = self.settings
        self.fence_at = fence_deadline(renew_sent, settings.lease_seconds, settings.fence_margin)
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0.0, self.fence_at - self.clock.now())
        self._timer = asyncio.get_running_loop().call_later(delay, self._fence_reached)

    def _fence_reached(self) -> None:
        self._timer = None
        if self.held and self.may_start():
            # woken before our clock says the deadline came: uvloop's timers count whole
            # milliseconds of a cached loop time, and one fired 0.4 ms early (the Citus
            # node-stop test); without a new timer the fence never came while the store
            # stayed down (no log, in-flight fetches not cancelled). Wait the rest.
            self._timer = asyncio.get_running_loop().call_later(
                max(0.0, self.fence_at - self.clock.now()), self._fence_reached)
            return
        if self.held and not self.may_start():
            log_event(log, logging.ERROR, "fence",
                      "could not renew shard leases in time: fenced (no new requests, "
                      "requests without their answer cut) until the store answers again",
                      worker=self.worker_id, reason="lease renewal late",
                      shards=sorted(self.held))
            if self.on_fence is not None:
                self.on_fence()

    def _merge(self, changes: ShardChanges) -> None:
        if not changes:
            return
        pending = self._changes
        for shard in changes.lost:
            pending.gained.pop(shard, None)
            pending.taken_over.discard(shard)
            pending.handover.discard(shard)
            pending.lost.add(shard)
        pending.gained.update(changes.gained)
        pending.taken_over |= changes.taken_over
        pending.handover |= changes.handover
        if self.on_change is not None:
            self.on_change()

    # ---- giving shards up ----------------------------------------------------------------

    async def release(self, shards: set[int]) -> None:
        """Release drained shards (the store bumps their epochs; our late writes are fenced)."""
        epochs = {s: self.held[s] for s in shards if s in self.held}
        if not epochs:
            return
        await self.store.release_shards(self.worker_id, sorted(epochs), epochs)
        for shard in epochs:
            self.held.pop(shard, None)
            self.draining.discard(shard)

    async def stop(self, leave: bool = True) -> None:
        """Stop the rounds; release every lease still held and leave the membership."""
        self.halt()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not leave:
            return
        with contextlib.suppress(StoreError):
            await self.release(set(self.held))
        with contextlib.suppress(StoreError):
            await self.store.leave(self.worker_id)
        self.fence_at = float("-inf")
