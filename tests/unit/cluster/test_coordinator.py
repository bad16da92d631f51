"""ShardCoordinator rounds against the memory store: what a restarted worker inherits."""

from __future__ import annotations

from courtier.clock import VirtualClock
from courtier.cluster.coordinator import LeaseSettings, ShardCoordinator
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
