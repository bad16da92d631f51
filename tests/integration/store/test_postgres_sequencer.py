"""The crawl-wide outbox sequencer (``courtier_sequence_events``, migration 0038) on
PostgreSQL and on Citus: it places every committed event exactly once, under writers
whose transactions commit out of order and two readers placing at the same time, and
it finds the events to place from each shard's positions, with no index entry of an
event's own.

The writers hold their transactions open across a random number of round trips after
writing (a seeded schedule, no sleeps): the event ids are taken in one order and
committed in another, and two readers call ``read_events`` all along.

Seen red (scratch copies of migration 0038 on a database at version 37): with the
sequencer recording ``placed_pos`` one above the head it read (``r.hi + 1``), the plain
PostgreSQL test left two events unplaced (``[None, None] == []``); with the sequencer's
advisory lock removed, the two readers handed out the same positions twice (34, 22, 29
distinct positions for 36 events in 3 runs of 3). The Citus variant stayed green under
both breaks (its readers' passes rarely fall between two commits of a shard): it checks
that the Citus planner runs the sequencer, not that it never skips. The never-skip case
on Citus is ``test_each_commit_is_placed_by_the_next_read_on_citus`` (one shard's commits
with a read after each, every time): red with ``r.hi + 1`` in ``citus/sequencer.sql`` and
in the migration (both stores' forms, a scratch edit, 2026-12-07: the event committed
after the first read never placed).
"""

from __future__ import annotations

import asyncio
import random
import re

import asyncpg
import pytest

from courtier.store.base import NewUrl
from courtier.store.postgres import PostgresStore, _rows
from courtier.store.postgres._schema import load_migrations, migrate
from tests.integration.store.rows import T0, finished, url_row

#: shards written, hosts a shard, writers (connections), transactions a writer
SHARDS, HOSTS, WRITERS, ROUNDS = 3, 12, 4, 9


def rows_on_few_shards() -> list[NewUrl]:
    """One URL on each of :data:`HOSTS` hosts of each of :data:`SHARDS` shards: writers
    of one shard share its head row, not a host's rows."""
    by_shard: dict[int, list[NewUrl]] = {}
    for i in range(40_000):
        row = url_row(f"http://s{i}.test/")
        by_shard.setdefault(row.shard, []).append(row)
        full = [s for s, rows in by_shard.items() if len(rows) >= HOSTS]
        if len(full) >= SHARDS:
            return [r for s in full[:SHARDS] for r in by_shard[s][:HOSTS]]
    raise AssertionError("not enough shards")


async def _writer(dsn: str, batches: list[list[NewUrl]], seed: int) -> None:
    rng = random.Random(seed)
    conn = await asyncpg.connect(dsn)
    try:
        for batch in batches:
            async with conn.transaction():
                await conn.fetchval(
                    "SELECT courtier_commit($1::courtier_commit[], '{}', '{}', $2)",
                    _rows.commit_rows([finished(r) for r in batch]), T0)
                for _ in range(rng.randrange(6)):  # held open while the others go on
                    await conn.fetchval("SELECT 1")
    finally:
        await conn.close()


async def _reader(store: PostgresStore, writing: asyncio.Event) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    last = 0
    for _ in range(100_000):  # bounded: the writers end long before
        page = await store.read_events(last, 5)
        got += [(e.id, e.url_key) for e in page]
        last = page[-1].id if page else last
        if not page and not writing.is_set():
            return got
    raise AssertionError("the reader never caught up")


async def places_every_event_once(store: PostgresStore, dsn: str) -> None:
    rows = rows_on_few_shards()
    await store.add_urls(rows)
    await store.load_due(range(1024), T0, 1000, 100)
    rng = random.Random(29)
    shuffled = rows[:]
    rng.shuffle(shuffled)
    batches: list[list[list[NewUrl]]] = [[] for _ in range(WRITERS)]
    while shuffled:
        size = rng.randrange(1, 4)
        batches[rng.randrange(WRITERS)].append(shuffled[:size])
        shuffled = shuffled[size:]
    writing = asyncio.Event()
    writing.set()
    readers = [asyncio.create_task(_reader(store, writing)) for _ in range(2)]
    try:
        await asyncio.wait_for(asyncio.gather(
            *(_writer(dsn, b, seed) for seed, b in enumerate(batches))), timeout=120)
    finally:
        writing.clear()
    seen = await asyncio.gather(*readers)
    conn = await asyncpg.connect(dsn)
    try:
        positions = await conn.fetch("SELECT read_pos, url_key FROM events ORDER BY read_pos")
    finally:
        await conn.close()
    written = sorted(r.url_key for r in rows)
    # every event placed once: distinct positions, none left unplaced
    assert [p for p, _ in positions if p is None] == []
    assert len({p for p, _ in positions}) == len(positions) == len(written)
    for got in seen:  # each reader: its own pass from 0 over the outbox, in order
        ids = [i for i, _ in got]
        assert ids == sorted(set(ids))
        assert sorted(k for _, k in got) == written  # none skipped, none twice


async def test_the_sequencer_places_every_event_once_under_out_of_order_commits(
    store: PostgresStore, pg_module_dsn: str,
) -> None:
    await places_every_event_once(store, pg_module_dsn)


async def test_the_sequencer_places_every_event_once_on_citus(
    citus_store: PostgresStore, citus_module_dsn: str,
) -> None:
    await places_every_event_once(citus_store, citus_module_dsn)


async def places_each_commit_between_reads(store: PostgresStore, dsn: str) -> None:
    """One shard's events committed one at a time with a read after each: the case the
    concurrent test above meets only by chance on Citus (a read between two commits of a
    shard), here every time."""
    few = rows_on_few_shards()
    rows = [r for r in few if r.shard == few[0].shard]
    await store.add_urls(rows)
    await store.load_due(range(1024), T0, 1000, 100)
    got: list[bytes] = []
    last = 0
    for row in rows:
        await _writer(dsn, [[row]], seed=0)
        page = await store.read_events(last, 100)
        got += [e.url_key for e in page]
        last = page[-1].id if page else last
        assert row.url_key in got  # placed by the read that follows its commit
    assert sorted(got) == sorted(r.url_key for r in rows)  # each once


async def test_each_commit_is_placed_by_the_next_read(
    store: PostgresStore, pg_module_dsn: str,
) -> None:
    await places_each_commit_between_reads(store, pg_module_dsn)


async def test_each_commit_is_placed_by_the_next_read_on_citus(
    citus_store: PostgresStore, citus_module_dsn: str,
) -> None:
    await places_each_commit_between_reads(citus_store, citus_module_dsn)


@pytest.mark.parametrize("table", ["events", "fetch_log"])
async def test_no_event_has_an_index_entry_for_the_sequencer(
    store: PostgresStore, pg_module_dsn: str, table: str,
) -> None:
    """Every partition of events: no partial index of unplaced events; every day
    partition of fetch_log: its id indexed by BRIN (no B-tree entry a row)."""
    conn = await asyncpg.connect(pg_module_dsn)
    try:
        assert await conn.fetchval(
            "SELECT count(*) FROM day_partitions WHERE parent = $1", table) >= 3
        indexes = await conn.fetch(
            "SELECT c.relname AS part, x.indexrelid::regclass::text AS name, am.amname,"
            " pg_get_expr(x.indpred, x.indrelid) AS pred FROM pg_inherits i"
            " JOIN pg_class p ON p.oid = i.inhparent JOIN pg_class c ON c.oid = i.inhrelid"
            " JOIN pg_index x ON x.indrelid = c.oid"
            " JOIN pg_class ic ON ic.oid = x.indexrelid JOIN pg_am am ON am.oid = ic.relam"
            " WHERE p.relname = $1", table)
    finally:
        await conn.close()
    assert [r["name"] for r in indexes if r["pred"] == "(read_pos IS NULL)"] == []
    if table == "fetch_log":
        ids = {r["name"]: r["amname"] for r in indexes
               if r["name"].endswith("_id") and re.fullmatch(r"fetch_log_d\d+", r["part"])}
        assert ids and set(ids.values()) == {"brin"}, ids



#: events of a commit's shape: $2 events from number $1 over 64 shards, positions from
#: the heads (courtier_commit's statement since migration 0032)
_EVENTS = (
    "WITH done AS (SELECT g % 64 AS shard, sha256(g::text::bytea) AS url_key"
    " FROM generate_series($1::integer, $1::integer + $2 - 1) g),"
    " counted AS (SELECT d.shard, count(*) AS n FROM done d GROUP BY d.shard),"
    " heads AS (INSERT INTO outbox_heads AS h (shard, last_pos) SELECT c.shard, c.n"
    " FROM counted c ORDER BY c.shard ON CONFLICT (shard) DO UPDATE"
    " SET last_pos = h.last_pos + EXCLUDED.last_pos RETURNING h.shard, h.last_pos)"
    " INSERT INTO events (shard, url_key, version, created_at, payload, shard_pos)"
    " SELECT d.shard, d.url_key, 1, $3, '{}', hd.last_pos - c.n + row_number()"
    " OVER (PARTITION BY d.shard ORDER BY d.url_key) FROM done d"
    " JOIN counted c ON c.shard = d.shard JOIN heads hd ON hd.shard = d.shard")


async def test_the_migration_starts_each_shard_below_its_first_unplaced_event(
    pg_dsn: str,
) -> None:
    """A crawl at version 37 with events placed by the old sequencer and events not yet
    placed: after migration 38 the sequencer places exactly the unplaced ones, above the
    positions handed out, and the partial index is gone from every partition (here the
    default one). Seen red: with the migration starting every shard at its head
    (``h.last_pos`` alone), the 300 unplaced events stayed unplaced (0 placed)."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        steps = load_migrations()
        assert steps[37].version == 38
        await migrate(conn, steps[:37])
        await conn.execute(_EVENTS, 0, 500, T0)
        assert await conn.fetchval("SELECT courtier_sequence_events()") == 500
        await conn.execute(_EVENTS, 500, 300, T0)
        await migrate(conn, steps[:38])
        assert await conn.fetchval("SELECT count(*) FROM outbox_placed") == 64
        assert await conn.fetchval(
            "SELECT count(*) FROM pg_indexes WHERE indexdef LIKE '%read_pos IS NULL%'") == 0
        assert await conn.fetchval("SELECT courtier_sequence_events()") == 300
        rows = await conn.fetch("SELECT read_pos FROM events ORDER BY read_pos")
        assert [r[0] for r in rows] == list(range(1, 801))
        assert await conn.fetchval("SELECT courtier_sequence_events()") == 0
    finally:
        await conn.close()
