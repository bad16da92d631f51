"""The outbox's retention by shard alone (docs/scale-out.md, "Bounded growth", "By shard
alone"): while no crawl-wide consumer is registered, every store prunes each shard up to
what its per-shard consumers have read, an event held in one shard holding back no other
shard's, without PostgreSQL's sequencer; a ``read_events`` reader below anything removed
is told (``EventsPruned``), a per-shard reader too (``ShardEventsPruned``).

Each test runs with and without PostgreSQL's day partitions made ahead (whole partitions
dropped, or rows of the default partition deleted).

Seen red (scratch copies): with the memory store's and SQLite's prune by shard replaced
by their crawl-wide prefix (the first event held stops everything), and PostgreSQL's
partition check demanding every row placed as the crawl-wide drop does,
``test_a_shard_held_by_a_consumer_holds_back_no_other_shard`` failed (shard 2's events
still there); with the position burnt for events never placed left out
(``_RAISE_PRUNED_THROUGH``: ``$2`` taken as false), ``test_a_reader_of_read_events_is_told
_even_of_events_never_placed`` failed on PostgreSQL and Citus (an empty page, no error).
"""

from __future__ import annotations

import pytest

from courtier.core.clock import VirtualClock
from courtier.core.errors import EventsPruned, ShardEventsPruned
from courtier.core.shard_cursor import ShardCursor
from courtier.store.base import Store
from tests.contract.test_outbox_retention_contract import LATER, prune_all
from tests.contract.test_outbox_retention_contract import ahead as ahead  # fixture
from tests.contract.test_shard_consumers_contract import crawl


async def test_a_shard_held_by_a_consumer_holds_back_no_other_shard(
        store: Store, store_clock: VirtualClock, ahead: bool) -> None:
    await store.register_shard_consumer("ix")
    await crawl(store, store_clock, {1: 3, 2: 3}, "a", ahead=ahead)  # shard 1's ids first
    everything = await store.read_events_by_shard(ShardCursor(), 100)
    assert len(everything.events) == 6
    await store.advance_shard_consumer("ix", ShardCursor({2: everything.cursor.position(2)}))
    await prune_all(store, LATER)
    with pytest.raises(ShardEventsPruned):  # shard 2's events went
        await store.read_events_by_shard(ShardCursor(), 100)
    kept = await store.read_events_by_shard(ShardCursor({2: 3}), 100)
    assert [(e.shard, e.shard_pos) for e in kept.events] == [(1, 1), (1, 2), (1, 3)]
    with pytest.raises(EventsPruned):  # a crawl-wide reader from the start is told
        await store.read_events(0, 100)
    await store.advance_shard_consumer("ix", kept.cursor)  # shard 1 read: it goes too
    await prune_all(store, LATER)
    assert (await store.read_events_by_shard(kept.cursor, 100)).events == []
    with pytest.raises(ShardEventsPruned):
        await store.read_events_by_shard(ShardCursor({2: 3}), 100)
    assert (await store.counts())["events"] == 0


async def test_a_reader_of_read_events_is_told_even_of_events_never_placed(
        store: Store, store_clock: VirtualClock, ahead: bool) -> None:
    """An unregistered crawl-wide reader caught up at position L; events committed after
    (on PostgreSQL never placed: nobody read crawl-wide since) are removed by shard: the
    reader's next read from L is refused, never an empty page."""
    await crawl(store, store_clock, {1: 2, 2: 1}, "a", ahead=ahead)
    caught_up = max(e.id for e in await store.read_events(0, 100))
    await crawl(store, store_clock, {1: 1, 2: 2}, "b", ahead=ahead)
    await prune_all(store, LATER)
    assert (await store.counts())["events"] == 0
    with pytest.raises(EventsPruned):
        await store.read_events(caught_up, 100)
    through = await store.events_pruned_through()
    assert through > caught_up
    assert await store.read_events(through, 100) == []
    # what comes next is read from there by a reader told so, and by a new consumer
    assert await store.register_consumer("late") == through
    await crawl(store, store_clock, {1: 1}, "c", ahead=ahead)
    fresh = await store.read_events(through, 100)
    assert len(fresh) == 1 and fresh[0].id > through


async def test_a_crawl_wide_consumer_brings_back_the_crawl_wide_prune(
        store: Store, store_clock: VirtualClock, ahead: bool) -> None:
    """With a crawl-wide consumer registered nothing above its position goes, whatever
    the per-shard consumers have read."""
    await crawl(store, store_clock, {1: 2, 2: 2}, "a", ahead=ahead)
    every = [e.id for e in await store.read_events(0, 100)]
    assert await store.register_consumer("wide") == 0
    await store.advance_consumer("wide", every[1])
    await prune_all(store, LATER)
    assert await store.events_pruned_through() <= every[1]
    assert [e.id for e in await store.read_events(every[1], 100)] == every[2:]
