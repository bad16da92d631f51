"""Every store reads its outbox by shard (``read_events_by_shard``): each shard's events
in commit order, every event once, resumable from the cursor's token, the limit shared
among the shards that are behind. The out-of-order commits of PostgreSQL are
tests/integration/store/test_postgres_shard_cursor.py.

Seen red: with the memory store's range read ending one position short (``through - 1``)
the pages dropped each shard's last event of a read (the union differed from the truth),
and with ``plan_reads`` giving the whole limit to the first shard behind, the shared-limit
test read only shard 1. ``shard_cursor_at`` (the conversion of an integer cursor): with
the memory store's cursor one position too high (``shard_pos`` instead of ``shard_pos -
1``) the conversion test failed on memory; with PostgreSQL's ``read_pos IS NULL OR`` left
out (events not yet placed counted as read) the unplaced test failed on PostgreSQL and
Citus (``{1: 4, 2: 4}`` for ``{1: 2, 2: 2}``)."""

from __future__ import annotations

from courtier.core.shard_cursor import ShardCursor
from courtier.store.base import Event, ReparseEvent, Store
from tests.contract.conftest import T0
from tests.contract.test_store_contract import done, new

SHARDS = (1, 2, 5)


async def fetch_round(store: Store, urls: list[tuple[str, int]], version: int) -> None:
    leases = await store.load_due(sorted({s for _, s in urls}), T0 + 10, 1000, 1000)
    assert len(leases) == len(urls)
    result = await store.commit([done(u, shard=s, version=version, next_fetch_at=T0 + 5)
                                 for u, s in urls])
    assert result.applied == len(urls)


def spread(per_shard: dict[int, int]) -> list[tuple[str, int]]:
    return [(f"http://s{shard}.test/{n}", shard)
            for shard, count in per_shard.items() for n in range(count)]


async def read_all(store: Store, cursor: ShardCursor, limit: int) -> tuple[list[Event],
                                                                           ShardCursor]:
    """Pages of ``limit`` until one is empty, resuming each time from the token."""
    got: list[Event] = []
    while True:
        page = await store.read_events_by_shard(ShardCursor.from_token(cursor.token()), limit)
        assert len(page.events) <= limit
        assert page.cursor.covers(cursor)  # never back
        order = [(e.shard, e.shard_pos) for e in page.events]
        assert order == sorted(order)
        got += page.events
        if not page.events:
            assert page.cursor == cursor
            return got, cursor
        cursor = page.cursor


def assert_each_shard_in_order(events: list[Event]) -> None:
    for shard in {e.shard for e in events}:
        positions = [e.shard_pos for e in events if e.shard == shard]
        assert positions == sorted(positions) and len(set(positions)) == len(positions)
        assert positions[0] >= 1


async def test_by_shard_reads_every_event_once_in_each_shards_order(store: Store) -> None:
    urls = spread({1: 4, 2: 1, 5: 3})
    await store.add_urls([new(u, shard=s) for u, s in urls])
    await fetch_round(store, urls, 0)
    await fetch_round(store, urls, 1)
    truth = await store.read_events(0, 1000)
    got, cursor = await read_all(store, ShardCursor(), 3)
    assert sorted((e.url_key, e.version) for e in got) == sorted(
        (e.url_key, e.version) for e in truth)
    assert {e.shard for e in got} == set(SHARDS)
    assert_each_shard_in_order(got)
    by_id = {e.id: e for e in truth}
    for event in got:  # the same events as the crawl-wide read, placed in their shard
        assert by_id[event.id].url_key == event.url_key
        assert by_id[event.id].payload == event.payload
    # a commit of one shard's URL later comes after that shard's position, and alone
    late = [("http://s2.test/0", 2)]
    await fetch_round(store, late, 2)
    more, after = await read_all(store, cursor, 3)
    assert [(e.shard, e.version) for e in more] == [(2, 3)]
    assert more[0].shard_pos > cursor.position(2)
    assert after.position(2) == more[0].shard_pos
    assert {s: after.position(s) for s in (1, 5)} == {s: cursor.position(s) for s in (1, 5)}


async def test_by_shard_reads_reparse_events_in_their_shard(store: Store) -> None:
    urls = spread({1: 2, 5: 1})
    await store.add_urls([new(u, shard=s) for u, s in urls])
    await fetch_round(store, urls, 0)
    first = await store.read_events_by_shard(ShardCursor(), 100)
    fetched = {e.url_key: e for e in first.events}
    event = next(e for e in first.events if e.shard == 5)
    added = await store.add_reparse_events(
        [ReparseEvent(event.url_key, event.version, 1, {"reparsed": True})])
    assert added == 1
    page = await store.read_events_by_shard(first.cursor, 100)
    assert [(e.shard, e.url_key, e.payload.get("reparsed")) for e in page.events] == [
        (5, event.url_key, True)]
    assert page.events[0].shard_pos > first.cursor.position(5)
    assert len(fetched) == 3


async def test_by_shard_shares_the_limit_among_shards_behind(store: Store) -> None:
    urls = spread({1: 9, 2: 2, 5: 1})
    await store.add_urls([new(u, shard=s) for u, s in urls])
    await fetch_round(store, urls, 0)
    page = await store.read_events_by_shard(ShardCursor(), 6)
    per_shard = {s: sum(1 for e in page.events if e.shard == s) for s in SHARDS}
    assert per_shard == {1: 3, 2: 2, 5: 1}  # the small backlogs whole, the rest to shard 1
    assert page.cursor == ShardCursor({1: 3, 2: 2, 5: 1})
    nothing = await store.read_events_by_shard(page.cursor, 0)
    assert nothing.events == [] and nothing.cursor == page.cursor
    rest = await store.read_events_by_shard(page.cursor, 100)
    assert [e.shard for e in rest.events] == [1] * 6
    assert (await store.read_events_by_shard(rest.cursor, 100)).events == []


async def test_by_shard_on_an_empty_outbox_reads_nothing(store: Store) -> None:
    page = await store.read_events_by_shard(ShardCursor(), 10)
    assert page.events == [] and page.cursor == ShardCursor()
    ahead = ShardCursor({3: 7})  # a cursor from elsewhere is kept, not moved back
    assert (await store.read_events_by_shard(ahead, 10)).cursor == ahead


async def placed_by_shard(store: Store) -> list[Event]:
    """Every event with its crawl-wide position (``read_events`` places them first)."""
    await store.read_events(0, 1000)
    return (await store.read_events_by_shard(ShardCursor(), 1000)).events


async def test_a_crawl_wide_position_converts_to_the_shard_cursor_read_at_it(
        store: Store) -> None:
    """``shard_cursor_at(n)``: a cursor below which every event has a position at or
    below ``n`` (never a skip), and here, commits in order, exactly those events."""
    urls = spread({1: 3, 2: 2, 5: 3})
    await store.add_urls([new(u, shard=s) for u, s in urls])
    await fetch_round(store, urls, 0)
    await fetch_round(store, [u for u in urls if u[1] != 2], 1)
    events = await placed_by_shard(store)
    assert len(events) == 14
    for n in range(max(e.id for e in events) + 1):
        cursor = await store.shard_cursor_at(n)
        below = {(e.shard, e.shard_pos) for e in events
                 if e.shard_pos <= cursor.position(e.shard)}
        assert below == {(e.shard, e.shard_pos) for e in events if e.id <= n}, n
    last = await store.read_events_by_shard(ShardCursor(), 1000)
    assert await store.shard_cursor_at(max(e.id for e in events)) == last.cursor


async def test_an_event_not_yet_placed_counts_as_unread(store: Store) -> None:
    """Events committed after the last crawl-wide read (PostgreSQL: no ``read_pos`` yet)
    are above any position handed out: the cursor stops below them."""
    urls = spread({1: 2, 2: 2})
    await store.add_urls([new(u, shard=s) for u, s in urls])
    await fetch_round(store, urls, 0)
    first = await placed_by_shard(store)
    at_first = (await store.read_events_by_shard(ShardCursor(), 1000)).cursor
    await fetch_round(store, urls, 1)  # not placed on PostgreSQL: no read_events since
    assert await store.shard_cursor_at(max(e.id for e in first)) == at_first


async def test_a_pruned_position_is_refused(store: Store) -> None:
    from courtier.core.errors import EventsPruned

    urls = spread({1: 2, 2: 2})
    await store.add_urls([new(u, shard=s) for u, s in urls])
    await fetch_round(store, urls, 0)
    events = await placed_by_shard(store)
    removed = 0
    for _ in range(10):
        removed += await store.prune_events(T0 + 10**6, 1000)
        if removed:
            break
    through = await store.events_pruned_through()
    assert removed and through >= min(e.id for e in events)
    try:
        await store.shard_cursor_at(through - 1)
    except EventsPruned as exc:
        assert exc.pruned_through == through
    else:
        raise AssertionError("a pruned position converted")
    await store.shard_cursor_at(through)
