"""The keeper that makes trap statistics and the near-duplicate index follow the shard
(cluster/shard_state.py), against the memory store."""

from __future__ import annotations

from collections.abc import Collection

import pytest

from courtier.cluster import shard_state
from courtier.cluster.shard_state import (
    ROWS_PER_QUERY,
    SAVE_EVERY,
    SIMHASHES_PER_SHARD,
    ShardStateKeeper,
)
from courtier.core.clock import VirtualClock
from courtier.core.errors import StoreError
from courtier.core.urls import SHARD_COUNT, canonicalize, shard_of
from courtier.dedup.pages import DuplicateTracker, id_hex
from courtier.dedup.simhash import simhash64
from courtier.frontier.trap_state import ShardedTemplateTracker
from courtier.frontier.traps import TrapRules
from courtier.store.cluster import TrapStats
from courtier.store.memory import MemoryStore
from tests.contract.conftest import T0
from tests.contract.test_store_contract import done, key, new
from tests.unit.frontier.test_trap_state import HOST, RULES, host_key, offer, trap_urls

TEXT = " ".join(f"word{i} about the history of the valley and its rivers" for i in range(40))


def keeper(store: MemoryStore, clock: VirtualClock, rules: TrapRules = RULES
           ) -> ShardStateKeeper:
    return ShardStateKeeper(store, ShardedTemplateTracker(rules, clock), DuplicateTracker(),
                            clock)


async def test_periodic_save_then_a_takeover_restores_the_throttle() -> None:
    clock = VirtualClock(T0)
    store = MemoryStore(clock)
    old = keeper(store, clock)
    assert old.tracker is not None
    first = offer(old.tracker, trap_urls(1, 300))
    shard = shard_of(host_key())
    await old.tick({shard})
    assert await store.load_trap_stats([host_key()]) == {}  # not yet: every SAVE_EVERY
    clock.advance(SAVE_EVERY)
    await old.tick({shard + 1})  # a host of a shard not held is never saved
    assert await store.load_trap_stats([host_key()]) == {}
    old.tracker.mark_dirty([host_key()])
    clock.advance(SAVE_EVERY)
    await old.tick({shard})
    assert old.hosts_saved == 1
    # the old owner dies; the new one registers the host and restores it from the store
    new_owner = keeper(store, clock)
    await new_owner.restore_hosts([host_key(), "never.test"])
    assert new_owner.hosts_restored == 1 and new_owner.tracker is not None
    second = offer(new_owner.tracker, trap_urls(2, 300))
    assert first + second <= RULES.template_min_urls + RULES.sample_budget + 2


async def test_hand_over_saves_and_forgets_only_the_shards_moving() -> None:
    clock = VirtualClock(T0)
    store = MemoryStore(clock)
    owner = keeper(store, clock)
    assert owner.tracker is not None
    offer(owner.tracker, trap_urls(1, 30))
    stay = next(f"http://stay{i}.test" for i in range(100)
                if shard_of(canonicalize(f"http://stay{i}.test/").host_key)
                != shard_of(host_key()))
    offer(owner.tracker, [stay + "/a"])
    assert await owner.hand_over({shard_of(host_key())}) == 1
    assert set(await store.load_trap_stats([host_key(), canonicalize(stay + "/").host_key])
               ) == {host_key()}
    assert owner.tracker.hosts() == [canonicalize(stay + "/").host_key]


class FailingSaves(MemoryStore):
    fail = True

    async def save_trap_stats(self, stats: list[TrapStats]) -> None:  # type: ignore[override]
        if self.fail:
            raise StoreError("store down")
        await super().save_trap_stats(stats)


async def test_a_failed_save_keeps_the_hosts_for_the_next_one() -> None:
    clock = VirtualClock(T0)
    store = FailingSaves(clock)
    owner = keeper(store, clock)
    assert owner.tracker is not None
    offer(owner.tracker, trap_urls(1, 30))
    clock.advance(SAVE_EVERY)
    try:
        await owner.tick({shard_of(host_key())})
        raise AssertionError("the store error must reach the worker loop")
    except StoreError:
        pass
    store.fail = False
    clock.advance(SAVE_EVERY)
    await owner.tick({shard_of(host_key())})
    assert set(await store.load_trap_stats([host_key()])) == {host_key()}


async def test_a_near_duplicate_of_a_page_fetched_by_the_old_owner_is_recognised() -> None:
    clock = VirtualClock(T0)
    store = MemoryStore(clock)
    url = HOST + "/first.html"
    shard = 7
    await store.add_urls([new(url, shard=shard)])
    await store.load_due([shard], T0, 10, 10)
    await store.commit([done(url, shard=shard, simhash=simhash64(TEXT))])
    twin_text = TEXT.replace("word3 ", "other ")
    # without the rebuild the new owner sees nothing near
    assert DuplicateTracker().fingerprint(key(HOST + "/copy.html", shard), twin_text)[1] is None
    owner = keeper(store, clock)
    owner.gained({shard, 8})
    owner.dropped({8})  # lost before its rebuild: never reported ready
    assert await owner.rebuild() == {shard}
    assert owner.rebuilding == set() and owner.pages_restored == 1
    # the page itself, fetched again, is not its own near-duplicate
    assert owner.duplicates.fingerprint(key(url, shard), TEXT)[1] is None
    _, twin = owner.duplicates.fingerprint(key(HOST + "/copy.html", shard), twin_text)
    assert twin == id_hex(int.from_bytes(key(url, shard)[:8], "big", signed=True))


async def test_rebuild_is_bounded_per_shard() -> None:
    clock = VirtualClock(T0)
    store = MemoryStore(clock)
    urls = [f"{HOST}/p{i}.html" for i in range(10)]
    await store.add_urls([new(u, shard=2) for u in urls])
    await store.load_due([2], T0, 100, 100)
    await store.commit([done(u, shard=2, simhash=(i + 1) << 40, fetched_at=T0 + i)
                        for i, u in enumerate(urls)])
    owner = ShardStateKeeper(store, None, DuplicateTracker(), clock, simhashes_per_shard=4)
    owner.gained({2})
    assert await owner.rebuild() == {2}
    assert owner.pages_restored == 4 and len(owner.duplicates.restored) == 4
    assert len(owner.duplicates.index) == 0  # the pages of its own fetches stay apart
    assert await owner.restore_hosts([host_key()]) is None  # no tracker: nothing to do


async def test_registering_hosts_with_nothing_stored_keeps_the_working_set() -> None:
    clock = VirtualClock(T0)
    store = MemoryStore(clock)
    owner = keeper(store, clock)
    assert owner.tracker is not None
    offer(owner.tracker, trap_urls(1, 3))  # met through links before it is registered
    assert not owner.tracker.is_ready(host_key())  # the store may hold more of it
    # a refill registers many hosts: those the store knows nothing of take no room
    await owner.restore_hosts([host_key()] + [f"http://new{i}.test" for i in range(50)])
    assert owner.tracker.hosts() == [host_key()] and owner.hosts_restored == 0
    assert owner.tracker.is_ready(host_key())  # nothing stored: memory holds all of it


class CountedSimhashes(MemoryStore):
    """A memory store noting the shards asked and the rows answered by each
    ``load_simhashes``."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock)
        self.answers: list[tuple[int, int]] = []  # (shards asked, rows answered)

    async def load_simhashes(self, shards: Collection[int], limit_per_shard: int
                             ) -> dict[int, list[tuple[bytes, int]]]:
        found = await super().load_simhashes(shards, limit_per_shard)
        self.answers.append((len(list(shards)), sum(len(v) for v in found.values())))
        return found


async def test_a_new_crawls_empty_shards_take_two_round_trips() -> None:
    """A store without a fetched page: the first round trip asks as many shards as full
    ones would fill ROWS_PER_QUERY with, the second asks the rest. Seen red with the batch
    kept at its first size (256 round trips)."""
    clock = VirtualClock(T0)
    store = CountedSimhashes(clock)
    owner = ShardStateKeeper(store, None, DuplicateTracker(), clock)
    owner.gained(set(range(SHARD_COUNT)))
    assert await owner.rebuild() == set(range(SHARD_COUNT))
    assert [shards for shards, _ in store.answers] == [
        ROWS_PER_QUERY // SIMHASHES_PER_SHARD, SHARD_COUNT - ROWS_PER_QUERY // SIMHASHES_PER_SHARD]


async def test_round_trips_follow_the_rows_per_shard_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Shards holding rows are asked so many at a time that an answer stays about
    ROWS_PER_QUERY rows (here 16, four rows a shard: four shards a round trip)."""
    monkeypatch.setattr(shard_state, "ROWS_PER_QUERY", 16)
    clock = VirtualClock(T0)
    store = CountedSimhashes(clock)
    for shard in range(12):
        urls = [f"{HOST}/s{shard}/p{i}.html" for i in range(4)]
        await store.add_urls([new(u, shard=shard) for u in urls])
        await store.load_due([shard], T0, 100, 100)
        await store.commit([done(u, shard=shard, simhash=(i + 1) << 40, fetched_at=T0 + i)
                            for i, u in enumerate(urls)])
    owner = ShardStateKeeper(store, None, DuplicateTracker(), clock, simhashes_per_shard=4)
    owner.gained(set(range(40)))
    assert await owner.rebuild() == set(range(40))
    assert owner.pages_restored == 48
    assert max(rows for _, rows in store.answers) <= 16
    assert store.answers[:3] == [(4, 16), (4, 16), (4, 16)]
