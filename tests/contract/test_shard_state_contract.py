"""Contract: the state a shard's new owner restores besides politeness — each host's
trap template statistics (an opaque blob per host) and the SimHashes of fetched pages
it rebuilds its near-duplicate index from (store/cluster.py) — against every store."""

from __future__ import annotations

from courtier.cluster.shard_state import ShardStateKeeper
from courtier.core.clock import VirtualClock
from courtier.core.urls import SHARD_COUNT, shard_of
from courtier.dedup.pages import DuplicateTracker
from courtier.frontier.trap_state import ShardedTemplateTracker, decode_host
from courtier.frontier.traps import TrapRules
from courtier.store.base import Store
from courtier.store.cluster import TrapStats
from tests.contract.conftest import T0
from tests.contract.test_store_contract import done, key, new
from tests.unit.frontier.test_trap_state import host_key, offer, others, trap_urls

BIG = (1 << 64) - 5  # an unsigned SimHash above 2**63: stored signed, read back unsigned


async def test_trap_stats_round_trip_and_replace(store: Store) -> None:
    blob = bytes(range(256)) * 3  # any bytes, NUL included
    await store.save_trap_stats([TrapStats("a.test", shard_of("a.test"), blob),
                                 TrapStats("b.test", shard_of("b.test"), b"\x00")])
    loaded = await store.load_trap_stats(["a.test", "b.test", "c.test"])
    assert set(loaded) == {"a.test", "b.test"}
    assert loaded["a.test"].data == blob and loaded["b.test"].data == b"\x00"
    assert loaded["a.test"].shard == shard_of("a.test")
    assert loaded["a.test"].saved_at > 0  # stamped by the store
    await store.save_trap_stats([TrapStats("a.test", shard_of("a.test"), b"first"),
                                 TrapStats("a.test", shard_of("a.test"), b"second")])
    again = await store.load_trap_stats(["a.test", "b.test"])
    assert again["a.test"].data == b"second"  # replaced; the last of the call wins
    assert again["b.test"].data == b"\x00"    # untouched
    assert await store.load_trap_stats([]) == {}
    await store.save_trap_stats([])  # nothing to do


async def test_load_simhashes_newest_first_bounded_per_shard(store: Store) -> None:
    urls = [f"http://a.test/{i}" for i in range(5)]
    await store.add_urls([new(u, shard=3) for u in urls] + [new("http://b.test/x", shard=4),
                                                             new("http://c.test/q", shard=5)])
    await store.load_due([3, 4, 5], T0, 100, 100)
    commits = [done(u, shard=3, simhash=BIG - i, fetched_at=T0 + i) for i, u in enumerate(urls)]
    commits.append(done("http://b.test/x", shard=4, simhash=7, fetched_at=T0))
    commits.append(done("http://c.test/q", shard=5))  # fetched, no SimHash (not HTML)
    await store.commit(commits)
    found = await store.load_simhashes([3, 4, 5, 6], 3)
    assert set(found) == {3, 4}  # shards without SimHash rows are absent
    # the three most recently fetched of shard 3, newest first, unsigned
    assert found[3] == [(key(urls[i], 3), BIG - i) for i in (4, 3, 2)]
    assert found[4] == [(key("http://b.test/x", 4), 7)]
    assert await store.load_simhashes([3], 0) == {}
    assert await store.load_simhashes([], 10) == {}
    everything = await store.load_simhashes([3], 100)
    assert sorted(fp for _, fp in everything[3]) == sorted(BIG - i for i in range(5))


async def test_load_simhashes_follows_a_refetch(store: Store) -> None:
    url = "http://a.test/page"
    await store.add_urls([new(url, shard=3)])
    await store.load_due([3], T0, 10, 10)
    await store.commit([done(url, shard=3, simhash=11, next_fetch_at=T0)])
    await store.load_due([3], T0 + 10, 10, 10)
    await store.commit([done(url, shard=3, version=1, simhash=12, fetched_at=T0 + 5)])
    assert await store.load_simhashes([3], 10) == {3: [(key(url, 3), 12)]}


# ---- the trap tracker's working set, kept in the store (cluster/shard_state.py) --------------

RULES = TrapRules(template_min_urls=20, sample_budget=5, sample_rate=0.5, max_hosts=4)
ALLOWANCE = RULES.template_min_urls + RULES.sample_budget
EVERY_SHARD = range(SHARD_COUNT)


def keeper_on(store: Store) -> ShardStateKeeper:
    clock = VirtualClock(T0)
    return ShardStateKeeper(store, ShardedTemplateTracker(RULES, clock), DuplicateTracker(),
                            clock)


def throttled_in(stored: TrapStats | None) -> bool:
    return stored is not None and any(s.since is not None for _, s in
                                      decode_host(stored.data)[2])


async def test_a_trap_host_pushed_out_of_the_working_set_is_saved_and_read_back(
        store: Store) -> None:
    keeper = keeper_on(store)
    tracker = keeper.tracker
    assert tracker is not None
    first = offer(tracker, trap_urls(1, 300))
    # a broad crawl: links to other hosts push the trap out of the working set
    offer(tracker, others(RULES.max_hosts))
    await keeper.tick(EVERY_SHARD)  # the hosts leaving are saved at once, not every 5 s
    assert throttled_in((await store.load_trap_stats([host_key()])).get(host_key()))
    assert tracker.leaving == 0 and not tracker.is_ready(host_key())  # memory let it go
    # a page of the trap host again: its statistics come back before its links are judged
    await keeper.recall(host_key())
    second = offer(tracker, trap_urls(2, 300))
    assert first + second <= ALLOWANCE + 2, (first, second)  # one allowance, not two
    assert keeper.hosts_recalled == 1
    await keeper.recall(host_key())  # in memory and merged: no second read
    assert keeper.hosts_recalled == 1


async def test_a_save_merges_the_stored_state_it_never_read(store: Store) -> None:
    earlier = keeper_on(store)  # an earlier run throttled the trap and saved it on leaving
    assert earlier.tracker is not None
    offer(earlier.tracker, trap_urls(1, 300))
    await earlier.save_hosts(lambda _: True)
    keeper = keeper_on(store)  # this run meets a link to the trap on another host's page
    assert keeper.tracker is not None
    offer(keeper.tracker, trap_urls(3, 1))
    offer(keeper.tracker, others(RULES.max_hosts))  # and lets it go before any page of it
    await keeper.tick(EVERY_SHARD)
    # the save merged the stored throttle in rather than replacing it with one link's worth
    assert throttled_in((await store.load_trap_stats([host_key()])).get(host_key()))
    await keeper.recall(host_key())
    assert offer(keeper.tracker, trap_urls(2, 300)) <= RULES.sample_budget + 2
