"""Every store bounds its outbox and audit log (docs/scale-out.md "Bounded growth"):
events older than the cut and passed by every registered consumer are removed, oldest
first; never one above a registered consumer's position; a consumer restarted resumes
exactly; a reader below what was removed is told so (``EventsPruned``, naming the oldest
readable position), never served a gap; audit rows older than the cut are removed with
their ids never reused.

Each test runs twice per store: with a prune before the writes (PostgreSQL has then
made the day partitions, and the prune drops whole partitions) and without (PostgreSQL's
rows sit in the default partition and are deleted row by row).

Seen red (scratch copies): with the consumer check removed from the memory store's
prune, and with the ``top > lowest`` check removed from PostgreSQL's partition drop,
``test_never_above_a_registered_cursor`` and ``test_a_restarted_consumer_resumes_exactly``
failed (the slow consumer, at position 2, got EventsPruned: "the outbox no longer holds
the events up to position 6"); with SQLite's ``check_readable`` emptied,
``test_a_reader_below_the_pruned_position_is_told`` failed with "DID NOT RAISE" (a
silent gap).
"""

from __future__ import annotations

import pytest

from courtier.core.clock import VirtualClock
from courtier.core.errors import EventsPruned, ShardEventsPruned
from courtier.core.shard_cursor import ShardCursor
from courtier.store.base import Store
from tests.contract.conftest import T0, StoreMaker
from tests.contract.test_store_contract import done, new

DAY = 86_400.0
#: far beyond any test's events: "every event is old enough"
LATER = T0 + 1000 * DAY


@pytest.fixture(params=["partitions-ahead", "no-partitions-ahead"])
def ahead(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "partitions-ahead")


async def crawl(store: Store, clock: VirtualClock, urls: list[str], *, ahead: bool) -> None:
    """One commit per URL (an event and an audit row each) at the clock's time; with
    ``ahead``, a prune that removes nothing runs first (it makes PostgreSQL's
    partitions)."""
    if ahead:
        assert await store.prune_events(T0 - 10 * DAY, 1000) == 0
        assert await store.prune_audit(T0 - 10 * DAY, 1000) == 0
    await store.add_urls([new(url, due=clock.now()) for url in urls])
    leases = await store.load_due([1], clock.now(), 100, 100)
    assert {lease.url for lease in leases} == set(urls)
    result = await store.commit([done(url, fetched_at=clock.now(), next_fetch_at=None)
                                 for url in urls])  # retired: never due again
    assert result.applied == len(urls)


async def positions(store: Store, after: int) -> list[int]:
    return [e.id for e in await store.read_events(after, 1000)]


async def prune_all(store: Store, before: float) -> int:
    """Prune until a call removes nothing (each call is bounded)."""
    total = 0
    for _ in range(50):
        removed = await store.prune_events(before, 2)
        if not removed and await store.prune_events(before, 2) == 0:
            return total
        total += removed
    raise AssertionError("pruning never settled")


async def test_old_events_are_removed_oldest_first(store: Store, store_clock: VirtualClock,
                                                   ahead: bool) -> None:
    old = [f"http://a.test/old{i}" for i in range(3)]
    await crawl(store, store_clock, old, ahead=ahead)
    store_clock.advance(2 * DAY)
    await crawl(store, store_clock, ["http://a.test/new0", "http://a.test/new1"], ahead=ahead)
    before = await positions(store, 0)
    assert len(before) == 5
    await prune_all(store, T0 + DAY)
    through = await store.events_pruned_through()
    assert through == before[2]  # the three old ones, not the two new ones
    kept = await store.read_events(through, 100)
    assert [e.url_key for e in kept] == [new(u).url_key for u in
                                         ("http://a.test/new0", "http://a.test/new1")]
    assert (await store.counts())["events"] == 2
    assert (await store.event_counts()).events == 5  # crawl totals, the pruned included


async def test_events_younger_than_the_cut_are_kept(store: Store, store_clock: VirtualClock,
                                                    ahead: bool) -> None:
    await crawl(store, store_clock, ["http://a.test/x", "http://a.test/y"], ahead=ahead)
    assert await prune_all(store, T0) == 0
    assert await store.events_pruned_through() == 0
    assert len(await positions(store, 0)) == 2


async def test_never_above_a_registered_cursor(store: Store, store_clock: VirtualClock,
                                               ahead: bool) -> None:
    await store.register_consumer("slow")
    await store.register_consumer("fast")
    await crawl(store, store_clock, [f"http://a.test/{i}" for i in range(5)], ahead=ahead)
    every = await positions(store, 0)
    await store.advance_consumer("fast", every[-1])
    await store.advance_consumer("slow", every[1])
    await prune_all(store, LATER)
    # PostgreSQL keeps a whole partition while any of it is above the cursor: nothing
    # above the slow consumer's position is ever removed, whatever else is
    through = await store.events_pruned_through()
    assert through <= every[1]
    assert await positions(store, every[1]) == every[2:]
    await store.advance_consumer("slow", every[3])
    await prune_all(store, LATER)
    assert await store.events_pruned_through() <= every[3]
    assert await positions(store, every[3]) == every[4:]
    await store.advance_consumer("slow", every[4])
    await prune_all(store, LATER)
    assert await store.events_pruned_through() == every[4]
    assert await positions(store, every[4]) == []


async def test_a_restarted_consumer_resumes_exactly(make_store: StoreMaker,
                                                    store_clock: VirtualClock,
                                                    ahead: bool) -> None:
    first = make_store()
    await first.open()
    try:
        await crawl(first, store_clock, [f"http://a.test/{i}" for i in range(6)], ahead=ahead)
        position = await first.register_consumer("indexer")
        page = await first.read_events(position, 2)
        seen = [e.id for e in page]
        await first.advance_consumer("indexer", page[-1].id)
        await prune_all(first, LATER)  # while the consumer is away
    finally:
        await first.close()
    store_clock.advance(3 * DAY)
    again = make_store()
    await again.open()
    try:
        position = await again.register_consumer("indexer")
        assert position == seen[-1]
        rest = await again.read_events(position, 100)
        assert [*seen, *(e.id for e in rest)] == sorted(set([*seen, *(e.id for e in rest)]))
        assert len(seen) + len(rest) == 6  # no event lost, none twice
    finally:
        await again.close()


async def old_pruned_new_kept(store: Store, clock: VirtualClock, old: int,
                              ahead: bool) -> tuple[list[int], int]:
    """``old`` events, one two days later, the old ones pruned: every position, and
    :meth:`events_pruned_through` (the last old position)."""
    await crawl(store, clock, [f"http://a.test/{i}" for i in range(old)], ahead=ahead)
    clock.advance(2 * DAY)
    await crawl(store, clock, ["http://a.test/late"], ahead=ahead)
    every = await positions(store, 0)
    await prune_all(store, T0 + DAY)
    through = await store.events_pruned_through()
    assert through == every[old - 1]
    return every, through


async def test_a_reader_below_the_pruned_position_is_told(store: Store,
                                                          store_clock: VirtualClock,
                                                          ahead: bool) -> None:
    every, through = await old_pruned_new_kept(store, store_clock, 4, ahead)
    for after in (0, every[0], through - 1):
        with pytest.raises(EventsPruned) as caught:
            await store.read_events(after, 10)
        assert (caught.value.position, caught.value.pruned_through) == (after, through)
        text = str(caught.value)
        assert f"oldest position still readable is {through + 1}" in text
        assert f"--after {through}" in text and "--consumer" in text
    assert await positions(store, through) == every[4:]


async def test_a_new_consumer_starts_at_the_oldest_readable_position(
        store: Store, store_clock: VirtualClock, ahead: bool) -> None:
    every, through = await old_pruned_new_kept(store, store_clock, 3, ahead)
    assert await store.register_consumer("newcomer") == through
    assert await positions(store, through) == every[3:]


async def test_old_audit_rows_are_removed_and_ids_never_reused(
        store: Store, store_clock: VirtualClock, ahead: bool) -> None:
    urls = [f"http://a.test/{i}" for i in range(3)]
    await crawl(store, store_clock, urls, ahead=ahead)
    store_clock.advance(2 * DAY)
    await crawl(store, store_clock, ["http://a.test/late"], ahead=ahead)
    rows = await store.fetch_log(0, 100)
    assert len(rows) == 4
    removed = 0
    for _ in range(20):
        step = await store.prune_audit(T0 + DAY, 2)
        if step == 0:
            break
        removed += step
    kept = await store.fetch_log(0, 100)
    assert [r["id"] for r in kept] == [rows[3]["id"]]
    assert removed >= 3 or ahead  # PostgreSQL counts a dropped partition by estimate
    store_clock.advance(DAY)
    await crawl(store, store_clock, [f"http://a.test/more{i}" for i in range(3)],
                ahead=False)
    later = await store.fetch_log(0, 100)
    assert len(later) == 4 and min(r["id"] for r in later[1:]) > rows[3]["id"]


async def test_a_forgotten_consumer_no_longer_holds_the_outbox(
        store: Store, store_clock: VirtualClock, ahead: bool) -> None:
    await store.register_consumer("gone")
    await crawl(store, store_clock, [f"http://a.test/{i}" for i in range(3)], ahead=ahead)
    every = await positions(store, 0)
    assert await prune_all(store, LATER) == 0  # "gone" is at 0: everything stays
    assert await store.forget_consumer("gone")
    await prune_all(store, LATER)
    assert await store.events_pruned_through() == every[-1]


async def test_a_shard_cursor_below_what_was_pruned_is_told(
        store: Store, store_clock: VirtualClock, ahead: bool) -> None:
    """The per-shard read (``read_events_by_shard``) never serves a gap either: a cursor
    below a shard's highest removed position gets ``ShardEventsPruned`` naming the cursor
    just above what was removed; one at or above it reads on. Seen red: with the memory
    store's ``check_unpruned`` call removed, and with PostgreSQL's ``_MARK_PRUNED`` left
    out of the partition drop, "DID NOT RAISE" (the slow reader got the new events only,
    two old ones silently lost)."""
    old = [f"http://a.test/old{i}" for i in range(3)]
    await crawl(store, store_clock, old, ahead=ahead)
    slow = await store.read_events_by_shard(ShardCursor(), 1)
    caught_up = await store.read_events_by_shard(ShardCursor(), 100)
    assert len(slow.events) == 1 and len(caught_up.events) == 3
    store_clock.advance(2 * DAY)
    fresh = ["http://a.test/new0", "http://a.test/new1"]
    await crawl(store, store_clock, fresh, ahead=ahead)
    assert await prune_all(store, T0 + DAY) == 3
    with pytest.raises(ShardEventsPruned) as caught:
        await store.read_events_by_shard(slow.cursor, 100)
    assert "--cursor c1." in str(caught.value)
    resume = ShardCursor.from_token(caught.value.resume)
    assert resume == caught_up.cursor  # just above the three removed
    for cursor in (resume, caught_up.cursor):
        page = await store.read_events_by_shard(cursor, 100)
        assert sorted(e.payload["url"] for e in page.events) == fresh
    with pytest.raises(ShardEventsPruned):
        await store.read_events_by_shard(ShardCursor(), 100)  # from the first: gone too
