"""IpSlots against the memory store: a slot granted to a cancelled caller is given back."""

from __future__ import annotations

import asyncio

from courtier.cluster.coordinator import LeaseSettings, ShardCoordinator
from courtier.cluster.ip_slots import IpSlots
from courtier.core.clock import VirtualClock
from courtier.store.cluster import IpGrant
from courtier.store.memory import MemoryStore

IP = "192.0.2.7"


class GatedStore(MemoryStore):
    """acquire_ip_slot answers only once ``gate`` is set (a slow store)."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock)
        self.asked = asyncio.Event()
        self.gate = asyncio.Event()

    async def acquire_ip_slot(self, ip: str, owner: str, max_concurrent: int,
                              min_gap: float, ttl: float, now: float) -> IpGrant:
        self.asked.set()
        await self.gate.wait()
        return await super().acquire_ip_slot(ip, owner, max_concurrent, min_gap, ttl, now)


def slots_of(store: MemoryStore, clock: VirtualClock) -> IpSlots:
    coordinator = ShardCoordinator(store, "w1", clock, LeaseSettings(30.0), shards=range(4))
    return IpSlots(store, coordinator, clock, 1, 0.0, 90.0)


async def test_a_slot_granted_after_its_caller_was_cancelled_is_released() -> None:
    clock = VirtualClock()
    store = GatedStore(clock)
    slots = slots_of(store, clock)
    caller = asyncio.create_task(slots.acquire(IP))
    await store.asked.wait()
    caller.cancel()
    store.gate.set()  # the store grants the slot after the caller is gone
    try:
        await caller
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the caller was not cancelled")
    await slots.settle()
    # the address (cap 1) is free again for another worker, long before the slot's expiry
    assert (await store.acquire_ip_slot(IP, "w2", 1, 0.0, 90.0, clock.now())).granted


async def test_a_granted_slot_is_kept_until_released() -> None:
    clock = VirtualClock()
    store = MemoryStore(clock)
    slots = slots_of(store, clock)
    token = await slots.acquire(IP)
    assert isinstance(token, int)
    assert not (await store.acquire_ip_slot(IP, "w2", 1, 0.0, 90.0, clock.now())).granted
    slots.release(IP, token)
    await slots.settle()
    assert (await store.acquire_ip_slot(IP, "w2", 1, 0.0, 90.0, clock.now())).granted
