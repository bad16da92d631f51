"""The per-shard outbox cursor (``read_events_by_shard``) under out-of-order commits, on
PostgreSQL and on Citus: a writer of one shard holds its transaction open while a
second writer of the same shard and a writer of another shard go ahead.

The shard's head row (``outbox_heads``, migration 0032) is locked by the first writer
until it commits, so the second writer of the shard waits for it and takes the next
position: the shard's positions follow commit order and a reader that has passed one
never misses an event at or below it.

Seen red (plain PostgreSQL, scratch copy of migration 0032): with the commit's events
numbered from a sequence (no head row locked: the numbering of insert time) and the
reader's heads the highest visible position, the second writer committed above the held
one and the read in between delivered it (``while_held`` held a2 besides the other
shard's event), moving the cursor past the held position. With the four URLs on one host
the test stayed green broken: the host-queue row lock held the second writer back.
"""

from __future__ import annotations

import asyncio

import asyncpg

from courtier.core.shard_cursor import ShardCursor
from courtier.store.base import Event, NewUrl
from courtier.store.postgres import PostgresStore, _rows
from tests.integration.store.rows import T0, finished, url_row

#: a backend of this database waiting for a lock (Citus: a distributed statement blocked)
WAITING = {
    False: "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
           " AND datname = current_database()",
    True: "SELECT count(*) FROM citus_lock_waits",
}


def one_shard_on_four_hosts() -> list[NewUrl]:
    """Four URLs of one shard on four hosts: the writers share no host-queue row, so the
    only lock between them is the shard's head."""
    rows = [url_row(f"http://h{i}.test/") for i in range(20_000)]
    first = rows[0].shard
    return [r for r in rows if r.shard == first][:4]


async def read_on(store: PostgresStore, cursor: ShardCursor) -> tuple[list[Event], ShardCursor]:
    """Pages of 2 until the cursor stops (a page may be empty and still move it: a gap)."""
    got: list[Event] = []
    while True:
        page = await store.read_events_by_shard(cursor, 2)
        got += page.events
        if page.cursor == cursor:
            return got, cursor
        cursor = page.cursor


async def test_shard_cursor_skips_nothing_when_one_shards_commits_come_out_of_order(
    store: PostgresStore, pg_module_dsn: str,
) -> None:
    await out_of_order_in_one_shard(store, pg_module_dsn, citus=False)


async def test_shard_cursor_skips_nothing_on_citus_when_commits_come_out_of_order(
    citus_store: PostgresStore, citus_module_dsn: str,
) -> None:
    await out_of_order_in_one_shard(citus_store, citus_module_dsn, citus=True)


async def out_of_order_in_one_shard(store: PostgresStore, dsn: str, *, citus: bool) -> None:
    same = one_shard_on_four_hosts()
    other = url_row("http://other.test/")
    shard = same[0].shard
    assert len({r.host_key for r in same}) == 4 and other.shard != shard
    await store.add_urls([*same, other])
    await store.commit([finished(same[0])])
    delivered, cursor = await read_on(store, ShardCursor())
    assert [(e.url_key, e.shard_pos) for e in delivered] == [(same[0].url_key, 1)]
    held, watch = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    second: asyncio.Task[object] | None = None
    try:
        held_tx = held.transaction()
        await held_tx.start()
        await held.fetchval("SELECT courtier_commit($1::courtier_commit[], '{}', '{}', $2)",
                            _rows.commit_rows([finished(same[1])]), T0)
        await store.commit([finished(other)])  # another shard: not held up
        second = asyncio.create_task(store.commit([finished(same[2])]))
        # the second writer of the shard is either done (a numbering without the head's
        # lock) or waiting for the held transaction's lock
        while not second.done() and not await watch.fetchval(WAITING[citus]):  # noqa: ASYNC110 (a server state: no event)
            await asyncio.sleep(0.05)
        while_held, cursor = await read_on(store, cursor)
        assert [e.url_key for e in while_held] == [other.url_key]
        assert cursor.position(shard) == 1  # nothing of the shard is readable yet
        delivered += while_held
        await held_tx.commit()
        await second
    finally:
        if second is not None and not second.done():
            second.cancel()
        await held.close()
        await watch.close()
    await store.commit([finished(same[3])])
    rest, cursor = await read_on(store, cursor)
    delivered += rest
    keys = [e.url_key for e in delivered]
    assert sorted(keys) == sorted([*(r.url_key for r in same), other.url_key])
    in_shard = [(e.url_key, e.shard_pos) for e in delivered if e.shard == shard]
    # commit order: the held writer (first to take the head) before the one that waited
    assert in_shard == [(r.url_key, i + 1) for i, r in enumerate(same)]
    assert (await store.read_events_by_shard(cursor, 10)).events == []


async def test_the_retention_runs_no_sequencer_while_nothing_is_old_enough(
    store: PostgresStore, pg_module_dsn: str,
) -> None:
    """A crawl younger than the retention never places its events crawl-wide (the
    sequencer's UPDATE of every event): the per-shard read needs no placing, and the
    retention sequences only when it has something to remove and a crawl-wide consumer
    is registered (without one it removes by shard: docs/scale-out.md, "By shard alone").
    Seen red: with the early return removed from ``_retention.prune_events``, the first
    run placed all three events (unplaced 0, not 3).

    The rows path: the events go to the default partition (the store made today's day
    partitions when it opened; they are dropped here, as in a store older than that)."""
    conn = await asyncpg.connect(pg_module_dsn)
    try:
        for (name,) in await conn.fetch("SELECT name FROM day_partitions"):
            await conn.execute(f'DROP TABLE "{name}"')
        await conn.execute("DELETE FROM day_partitions")
        rows = [url_row(f"http://r{i}.test/") for i in range(3)]
        await store.add_urls(rows)
        await store.commit([finished(r) for r in rows])
        # nothing old enough (the run makes the partitions of the days after this one)
        assert await store.prune_events(T0 - 86_400, 100) == 0
        unplaced = "SELECT count(*) FROM events WHERE read_pos IS NULL"
        assert await conn.fetchval(unplaced) == 3
        page = await store.read_events_by_shard(ShardCursor(), 10)
        assert sorted(e.url_key for e in page.events) == sorted(r.url_key for r in rows)
        # old enough now, no crawl-wide consumer: removed by shard, never placed; the
        # position burnt above every one handed out (none) refuses a reader from 0
        assert await store.prune_events(T0 + 10, 100) == 3
        assert await store.events_pruned_through() == 1
        # with a crawl-wide consumer registered the run places the events first (its
        # checks need positions) and keeps those above the consumer's position
        assert await store.register_consumer("wide") == 1
        more = [url_row(f"http://r{i}.test/more") for i in range(3)]
        await store.add_urls(more)
        await store.commit([finished(r) for r in more])
        assert await store.prune_events(T0 + 10, 100) == 0
        assert await conn.fetchval(unplaced) == 0
        await store.advance_consumer("wide", 4)
        assert await store.prune_events(T0 + 10, 100) == 3
        assert await store.events_pruned_through() == 4
    finally:
        await conn.close()
