"""Every store keeps named consumers with a per-shard cursor (``register_shard_consumer``,
docs/scale-out.md "Named consumers by shard"): a new one starts just above what the
retention removed in each shard, its cursor never moves back in any shard, a name is of
one kind only, and the retention never removes an event a per-shard consumer has not
read in its shard (a shard missing from its cursor is held whole).

Each retention test runs with and without PostgreSQL's day partitions made ahead (the
prune then drops whole partitions, otherwise it deletes rows of the default partition).

Seen red (scratch copies): with ``holds`` left out of the memory store's prune, with the
floors ignored by SQLite's window query (``0 AND ?3 IS NOT NULL …``), with PostgreSQL's
``_READ_BY_SHARD`` filter replaced by ``true`` (both the DELETE and the partition check),
``test_the_retention_keeps_what_a_shard_consumer_has_not_read`` and
``test_a_shard_missing_from_the_cursor_is_held_whole`` failed with ShardEventsPruned (the
slow consumer's unread events in shard 1 were gone).
"""

from __future__ import annotations

import pytest

from courtier.core.clock import VirtualClock
from courtier.core.errors import ConfigError
from courtier.core.shard_cursor import ShardCursor
from courtier.store.base import Store
from tests.contract.conftest import T0, StoreMaker
from tests.contract.test_outbox_retention_contract import LATER, prune_all
from tests.contract.test_outbox_retention_contract import ahead as ahead  # fixture
from tests.contract.test_store_contract import done, new

DAY = 86_400.0


async def crawl(store: Store, clock: VirtualClock, per_shard: dict[int, int], tag: str,
                *, ahead: bool) -> None:
    """``per_shard[s]`` URLs fetched once (retired) in each shard ``s``: one event each.
    With ``ahead``, a prune that removes nothing runs first (PostgreSQL's partitions)."""
    if ahead:
        assert await store.prune_events(T0 - 10 * DAY, 1000) == 0
    urls = [(f"http://s{s}.test/{tag}{n}", s) for s, count in per_shard.items()
            for n in range(count)]
    await store.add_urls([new(u, shard=s, due=clock.now()) for u, s in urls])
    leases = await store.load_due(sorted(per_shard), clock.now(), 100, 100)
    assert len(leases) == len(urls)
    result = await store.commit([done(u, shard=s, fetched_at=clock.now(), next_fetch_at=None)
                                 for u, s in urls])
    assert result.applied == len(urls)


async def test_unknown_and_new_shard_consumers(store: Store) -> None:
    assert await store.shard_consumer_position("nobody") is None
    assert await store.register_shard_consumer("indexer") == ShardCursor()
    assert await store.shard_consumer_position("indexer") == ShardCursor()
    assert await store.shard_consumers() == {"indexer": ShardCursor()}
    assert await store.consumers() == {}  # not a crawl-wide one


async def test_a_shard_cursor_never_moves_back(store: Store) -> None:
    await store.register_shard_consumer("a")
    moved = await store.advance_shard_consumer("a", ShardCursor({1: 5, 2: 3}))
    assert moved == ShardCursor({1: 5, 2: 3})
    late = await store.advance_shard_consumer("a", ShardCursor({1: 2, 2: 7, 4: 1}))
    assert late == ShardCursor({1: 5, 2: 7, 4: 1})  # shard 1 kept, the others moved
    assert await store.register_shard_consumer("a") == late  # registering again keeps it
    assert await store.shard_consumer_position("a") == late
    assert await store.advance_shard_consumer("new", ShardCursor({3: 2})) == \
        ShardCursor({3: 2})  # an advance registers a new name
    assert set(await store.shard_consumers()) == {"a", "new"}


async def test_a_name_is_of_one_kind(store: Store) -> None:
    await store.register_consumer("wide")
    await store.register_shard_consumer("narrow")
    with pytest.raises(ConfigError, match="crawl-wide"):
        await store.register_shard_consumer("wide")
    with pytest.raises(ConfigError, match="crawl-wide"):
        await store.advance_shard_consumer("wide", ShardCursor({1: 1}))
    with pytest.raises(ConfigError, match="per-shard"):
        await store.register_consumer("narrow")
    with pytest.raises(ConfigError, match="per-shard"):
        await store.advance_consumer("narrow", 3)
    assert await store.forget_consumer("narrow") is True
    assert await store.forget_consumer("narrow") is False
    assert await store.register_consumer("narrow") == 0  # forgotten: free again


async def test_a_shard_cursor_survives_reopening(make_store: StoreMaker) -> None:
    first = make_store()
    await first.open()
    await first.advance_shard_consumer("a", ShardCursor({1: 4, 7: 2}))
    await first.close()
    again = make_store()
    await again.open()
    try:
        assert await again.shard_consumer_position("a") == ShardCursor({1: 4, 7: 2})
    finally:
        await again.close()


async def test_the_retention_keeps_what_a_shard_consumer_has_not_read(
        store: Store, store_clock: VirtualClock, ahead: bool) -> None:
    await store.register_shard_consumer("slow")
    await store.register_shard_consumer("fast")
    await crawl(store, store_clock, {1: 3, 2: 3}, "a", ahead=ahead)
    everything = await store.read_events_by_shard(ShardCursor(), 100)
    assert len(everything.events) == 6
    last = max(e.id for e in await store.read_events(0, 100))  # PostgreSQL: sequenced
    await store.advance_shard_consumer("fast", everything.cursor)
    await store.advance_shard_consumer("slow", ShardCursor({1: 1, 2: 3}))
    await prune_all(store, LATER)
    # shard 1's positions 2 and 3 are unread by "slow": still there (PostgreSQL keeps a
    # whole partition that holds one of them, so more may stay, never less)
    page = await store.read_events_by_shard(ShardCursor({1: 1, 2: 3}), 100)
    assert [(e.shard, e.shard_pos) for e in page.events] == [(1, 2), (1, 3)]
    await store.advance_shard_consumer("slow", page.cursor)
    await prune_all(store, LATER)
    assert await store.events_pruned_through() == last
    assert (await store.read_events_by_shard(page.cursor, 100)).events == []


async def test_a_shard_missing_from_the_cursor_is_held_whole(
        store: Store, store_clock: VirtualClock, ahead: bool) -> None:
    await store.register_shard_consumer("one-shard")
    await crawl(store, store_clock, {1: 2, 2: 2}, "a", ahead=ahead)
    await store.advance_shard_consumer("one-shard", ShardCursor({2: 2}))
    await prune_all(store, LATER)
    page = await store.read_events_by_shard(ShardCursor({2: 2}), 100)
    assert [(e.shard, e.shard_pos) for e in page.events] == [(1, 1), (1, 2)]
    assert await store.forget_consumer("one-shard")
    await prune_all(store, LATER)
    assert len(await store.read_events(await store.events_pruned_through(), 100)) == 0


async def test_a_new_shard_consumer_starts_above_what_was_removed(
        store: Store, store_clock: VirtualClock, ahead: bool) -> None:
    await crawl(store, store_clock, {1: 2, 2: 1}, "old", ahead=ahead)
    store_clock.advance(2 * DAY)
    await crawl(store, store_clock, {1: 1, 2: 1}, "new", ahead=ahead)
    await prune_all(store, T0 + DAY)
    start = await store.register_shard_consumer("newcomer")
    assert start == ShardCursor({1: 2, 2: 1})
    page = await store.read_events_by_shard(start, 100)  # no ShardEventsPruned
    assert [(e.shard, e.shard_pos) for e in page.events] == [(1, 3), (2, 2)]
