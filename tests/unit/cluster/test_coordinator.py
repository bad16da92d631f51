"""ShardCoordinator rounds against the memory store: what a restarted worker inherits."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any, cast

from courtier.cluster.coordinator import LeaseSettings, ShardChanges, ShardCoordinator
from courtier.cluster.rendezvous import target_owners
from courtier.cluster.start_gate import GateKeeper, SiblingGate
from courtier.core.clock import VirtualClock
from courtier.store.cluster import ClusterView
from courtier.store.memory import MemoryStore

SHARDS = range(8)


def coordinator(store: MemoryStore, clock: VirtualClock, worker_id: str) -> ShardCoordinator:
    return ShardCoordinator(store, worker_id, clock, LeaseSettings(30.0), shards=SHARDS)


async def test_a_restart_under_the_same_id_frees_the_slots_its_crashed_process_held() -> None:
    clock = VirtualClock()
    store = MemoryStore(clock)
    first = coordinator(store, clock, "w1")
    await first.round()
    now = clock.now()
    for _ in range(2):  # two requests in flight when the process is killed
        assert (await store.acquire_ip_slot("192.0.2.5", "w1", 2, 0.0, 90.0, now)).granted
    assert (await store.acquire_ip_slot("192.0.2.6", "w2", 1, 0.0, 90.0, now)).granted
    assert not (await store.acquire_ip_slot("192.0.2.5", "w1", 2, 0.0, 90.0, now)).granted
    # kill -9: no stop(), no release; a new process of the same worker starts at once
    clock.advance(1.0)
    await coordinator(store, clock, "w1").round()
    now = clock.now()
    assert (await store.acquire_ip_slot("192.0.2.5", "w1", 2, 0.0, 90.0, now)).granted
    assert (await store.acquire_ip_slot("192.0.2.5", "w1", 2, 0.0, 90.0, now)).granted
    # another worker's slot is not ours to free
    assert not (await store.acquire_ip_slot("192.0.2.6", "w2", 1, 0.0, 90.0, now)).granted


async def test_shards_a_crashed_process_of_ours_held_count_as_taken_over() -> None:
    clock = VirtualClock()
    store = MemoryStore(clock)
    first = coordinator(store, clock, "w1")
    gained = (await first.round()).gained
    assert set(gained) == set(SHARDS)
    clock.advance(1.0)
    again = await coordinator(store, clock, "w1").round()
    # same epochs (the id's own unexpired leases), but the last requests are unknown
    assert again.gained == gained
    assert again.taken_over == set(SHARDS)


async def test_a_restart_names_every_shard_still_under_its_id_and_hands_over_the_others(
        ) -> None:
    """A worker's lease renews every shard it owns (store/cluster.py): a shard under our id
    that a round did not name would stay ours, never handed over, while we renew. Seen red
    with the coordinator naming only its plan (handover empty, w2's shards kept by w1)."""
    clock = VirtualClock()
    store = MemoryStore(clock)
    await coordinator(store, clock, "w1").round()  # all 8, then the process is killed
    clock.advance(1.0)
    await store.heartbeat("w2", 1.0, {}, clock.now())
    theirs = {s for s, owner in target_owners(SHARDS, {"w1": 1.0, "w2": 1.0}).items()
              if owner == "w2"}
    assert theirs and theirs != set(SHARDS)
    restarted = coordinator(store, clock, "w1")
    changes = await restarted.round()
    assert set(changes.gained) == set(SHARDS)  # ours at their epochs, taken over
    assert changes.handover == theirs  # drained, then released for w2
    assert restarted.draining == theirs


class _Recording:
    """A store whose calls are listed by name (with the heartbeat's lease length)."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._store, name)

        async def recorded(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(f"{name}{args[4:]}" if name == "heartbeat" else name)
            return await call(*args, **kwargs)

        return recorded


async def test_a_round_that_takes_nothing_writes_only_its_heartbeat_which_renews() -> None:
    """The heartbeat is the round's renewal (its lease length given): a round whose plan
    wants no shard it does not own calls no ``acquire_shards``, keeps every shard at its
    epoch, and moves the fence from the heartbeat. Seen red with the coordinator naming
    its kept shards to ``acquire_shards`` every round as before (its calls read
    ``[..., 'acquire_shards']``) and with the heartbeat sent without the lease length
    (``'heartbeat()'``; and the restart tests above then lost shards they owned)."""
    clock = VirtualClock()
    store = MemoryStore(clock)
    recording = _Recording(store)
    worker = ShardCoordinator(cast(Any, recording), "w1", clock, LeaseSettings(30.0),
                              shards=SHARDS)
    first = await worker.round()
    assert recording.calls == ["release_ip_slots_of", "heartbeat(30.0,)", "cluster_view",
                               "acquire_shards", "prune_workers"]
    for _ in range(3):  # each round past the lease the round before it renewed
        clock.advance(40.0)
        recording.calls.clear()
        assert not await worker.round()
        assert recording.calls == ["heartbeat(30.0,)", "cluster_view"]
        assert worker.held == first.gained and worker.may_start()
        assert await store.acquire_shards("w2", list(SHARDS), clock.now(), 30.0) == {}


async def test_shards_released_by_a_graceful_stop_are_gained_with_their_clocks() -> None:
    clock = VirtualClock()
    store = MemoryStore(clock)
    first = coordinator(store, clock, "w1")
    await first.round()
    await first.release(set(SHARDS))
    clock.advance(1.0)
    again = await coordinator(store, clock, "w1").round()
    assert set(again.gained) == set(SHARDS)
    assert again.taken_over == set()  # the saved clocks are complete: no extra wait


async def test_the_first_round_forgets_workers_silent_for_a_day() -> None:
    clock = VirtualClock()
    store = MemoryStore(clock)
    await store.heartbeat("crashed-long-ago", 1.0, {}, clock.now())
    clock.advance(86_400.0 + 60.0)
    await store.heartbeat("crashed-recently", 1.0, {}, clock.now())
    await coordinator(store, clock, "w1").round()
    assert [w.worker_id for w in (await store.cluster_view()).workers] == [
        "crashed-recently", "w1"]


def expecting(store: MemoryStore, clock: VirtualClock, worker_id: str,
              n: int) -> ShardCoordinator:
    return ShardCoordinator(store, worker_id, clock, LeaseSettings(30.0), shards=SHARDS,
                            expect_workers=n)


async def test_workers_started_together_wait_for_each_other_and_split_without_a_handover(
) -> None:
    clock = VirtualClock()
    store = MemoryStore(clock)
    first, second = expecting(store, clock, "w1", 2), expecting(store, clock, "w2", 2)
    assert not await first.round()  # alone: heartbeat only, no lease
    assert first.awaiting_quorum and first.held == {}
    clock.advance(0.2)
    got_second = await second.round()  # sees w1 live: the quorum is there
    clock.advance(0.2)
    got_first = await first.round()
    assert not first.awaiting_quorum and not second.awaiting_quorum
    assert set(got_first.gained).isdisjoint(got_second.gained)
    assert set(got_first.gained) | set(got_second.gained) == set(SHARDS)
    assert not got_first.handover and not got_second.handover  # nothing to give back


async def test_the_quorum_wait_ends_after_one_lease_ttl() -> None:
    clock = VirtualClock()
    store = MemoryStore(clock)
    lonely = expecting(store, clock, "w1", 3)
    assert not await lonely.round()
    clock.advance(29.0)
    assert not await lonely.round() and lonely.awaiting_quorum
    clock.advance(1.5)
    assert set((await lonely.round()).gained) == set(SHARDS)
    assert not lonely.awaiting_quorum


async def test_a_worker_joining_a_running_cluster_does_not_wait() -> None:
    clock = VirtualClock()
    store = MemoryStore(clock)
    await coordinator(store, clock, "w1").round()  # holds every shard
    clock.advance(1.0)
    newcomer = expecting(store, clock, "w2", 5)
    await newcomer.round()
    assert not newcomer.awaiting_quorum


# ---- the start gate of `crawl --workers N` (cluster/start_gate.py) ------------------------


def gated(store: object, clock: VirtualClock, worker_id: str,
          keeper: GateKeeper, opened: threading.Event) -> ShardCoordinator:
    """A coordinator whose start gate is a child's side of ``keeper``, as in local.py."""
    gate = SiblingGate(opened, lambda: keeper.registered(worker_id))
    return ShardCoordinator(store, worker_id, clock, LeaseSettings(30.0),  # type: ignore[arg-type]
                            shards=SHARDS, start_gate=gate)


async def test_gated_workers_wait_past_any_lease_ttl_then_each_takes_its_own_share() -> None:
    """Seen red with the gate ignored (``_awaiting_siblings`` returning False): w1 took
    every shard on its first round."""
    clock = VirtualClock()
    store = MemoryStore(clock)
    opened = threading.Event()
    keeper = GateKeeper(["w1", "w2", "w3"], opened)
    workers = [gated(store, clock, w, keeper, opened) for w in ("w1", "w2", "w3")]
    first, second, third = workers
    for _ in range(10):  # five lease TTLs: a quorum's deadline would have ended the wait
        assert not await first.round() and not await second.round()
        assert first.awaiting_quorum and first.held == {}
        clock.advance(15.0)
    changes = [await third.round(), await first.round(), await second.round()]
    targets = target_owners(SHARDS, {"w1": 1.0, "w2": 1.0, "w3": 1.0})
    for worker, got in zip((third, first, second), changes, strict=True):
        assert set(got.gained) == {s for s, w in targets.items() if w == worker.worker_id}
        assert not got.handover and not worker.awaiting_quorum
    assert [await w.round() for w in workers] == [ShardChanges()] * 3  # nothing moves after


class _SiblingRegistersDuringTheView:
    """The memory store, where ``arrive`` runs while the first cluster view is read (after
    the view's snapshot): a sibling heartbeats and registers in that moment."""

    def __init__(self, store: MemoryStore, arrive: Callable[[], Awaitable[None]]) -> None:
        self._store = store
        self._arrive: Callable[[], Awaitable[None]] | None = arrive

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def cluster_view(self) -> ClusterView:
        view = await self._store.cluster_view()
        if self._arrive is not None:
            arrive, self._arrive = self._arrive, None
            await arrive()
        return view


async def test_the_gate_is_read_before_the_view_the_plan_is_made_from() -> None:
    """A gate that opens while a view is read must not let a plan use that view (it may
    lack the sibling whose registration opened the gate). Seen red with the gate asked
    after the view: w1 took all 8 shards, then handed w2's over."""
    clock = VirtualClock()
    store = MemoryStore(clock)
    opened = threading.Event()
    keeper = GateKeeper(["w1", "w2"], opened)

    async def w2_registers() -> None:
        await store.heartbeat("w2", 1.0, {}, clock.now())
        keeper.registered("w2")

    first = gated(_SiblingRegistersDuringTheView(store, w2_registers), clock, "w1", keeper,
                  opened)
    second = gated(store, clock, "w2", keeper, opened)
    got = [await first.round(), await first.round()]
    got.append(await second.round())
    got.append(await first.round())
    targets = target_owners(SHARDS, {"w1": 1.0, "w2": 1.0})
    assert set(first.held) == {s for s, w in targets.items() if w == "w1"}
    assert set(second.held) == {s for s, w in targets.items() if w == "w2"}
    assert not any(changes.handover for changes in got)


# ---- the end of a one-shot crawl (cluster/end_gate.py) ----------------------------------


async def test_a_worker_that_found_the_crawl_over_takes_no_shard_a_sibling_left() -> None:
    """w2 leaves (releases everything, leaves the membership), or dies (its leases lapse):
    w1, whose last look found the crawl over, renews its own shards and takes none of
    w2's; once a look finds work, its next round takes them all. Seen red with the rule
    gone (``crawl_over`` not read): w1 gained w2's shards at once."""
    for w2_dies in (False, True):
        clock = VirtualClock()
        store = MemoryStore(clock)
        over = threading.Event()
        first = ShardCoordinator(store, "w1", clock, LeaseSettings(30.0), shards=SHARDS,
                                 crawl_over=over.is_set)
        second = coordinator(store, clock, "w2")
        await store.heartbeat("w2", 1.0, {}, clock.now())  # both live before any plan
        await first.round()
        await second.round()
        targets = target_owners(SHARDS, {"w1": 1.0, "w2": 1.0})
        mine = {s for s, w in targets.items() if w == "w1"}
        assert set(first.held) == mine and 0 < len(mine) < len(SHARDS)
        epochs = dict(first.held)
        over.set()
        if w2_dies:
            clock.advance(31.0)  # w2's heartbeat and leases lapse: no stop, no release
        else:
            await second.stop(leave=True)
            clock.advance(1.0)
        assert await first.round() == ShardChanges()
        assert first.held == epochs  # its own leases renewed, nothing more
        view = await store.cluster_view()
        assert {lease.shard for lease in view.leases
                if lease.owner == "w1" and lease.expires_at > view.now} == mine
        over.clear()  # a look found work (a URL SCHEDULED in w2's shards, say)
        got = await first.round()
        assert set(got.gained) == set(SHARDS) - mine and set(first.held) == set(SHARDS)
        assert got.taken_over == (set(SHARDS) - mine if w2_dies else set())


async def test_a_fence_timer_woken_early_waits_for_the_deadline_then_fences() -> None:
    """The event loop may wake the fence timer a hair before the clock reaches the fence
    deadline (uvloop counts whole milliseconds of a cached loop time: 0.4 ms early in
    the Citus node-stop test). The fence must still come: the timer is set again for
    the rest, and the fence falls when it is reached.

    Seen red: with the old ``_fence_reached`` (no new timer), "the fence was dropped: no
    timer left"."""
    clock = VirtualClock()
    store = MemoryStore(clock)
    fenced: list[float] = []
    c = coordinator(store, clock, "w1")
    c.on_fence = lambda: fenced.append(clock.now())
    await c.round()
    assert c.held and c.may_start()
    try:
        clock.advance(c.fence_at - clock.now() - 0.0004)  # the loop's timer, 0.4 ms early
        c._fence_reached()
        assert fenced == [] and c.may_start()
        assert c._timer is not None, "the fence was dropped: no timer left"
        clock.advance(0.001)
        c._fence_reached()  # (what the new timer does once the rest has passed)
        assert fenced == [clock.now()] and not c.may_start()
    finally:
        await c.stop(leave=False)
