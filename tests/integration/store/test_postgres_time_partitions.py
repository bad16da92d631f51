"""PostgreSQL's day partitions of the outbox and the audit log (migration
``*_time_partitions``, docs/scale-out.md "Bounded growth"): a partition holding an event
whose transaction commits late is never dropped before that event is placed and passed
by every registered consumer; an existing crawl's tables become the ``*_legacy``
partitions, keep their rows, positions and ids, and are dropped whole once old enough.
The shared behaviour of pruning is in tests/contract/test_outbox_retention_contract.py."""

from __future__ import annotations

import time

import asyncpg

from courtier.core.clock import VirtualClock
from courtier.store.postgres import PostgresStore, _schema
from tests.integration.store.rows import T0, finished, url_row
from tests.pg import truncate

DAY = 86_400.0


async def _commit_pages(store: PostgresStore, names: list[str], at: float) -> None:
    rows = [url_row(f"http://{name}.test/") for name in names]
    await store.add_urls(rows)
    due = await store.load_due(sorted({r.shard for r in rows}), at + 1e6, 100, 100)
    assert len(due) == len(rows)
    result = await store.commit([finished(r) for r in rows])
    assert result.applied == len(rows)


async def _partitions(conn: asyncpg.Connection, parent: str) -> list[str]:
    rows = await conn.fetch("SELECT name FROM day_partitions WHERE parent = $1 ORDER BY hi",
                            parent)
    return [str(r[0]) for r in rows]


async def test_a_partition_with_an_event_committed_late_waits_for_its_position(
        pg_module_dsn: str) -> None:
    """An event inserted into today's partition by a transaction that stays open: the
    day's partition is not dropped while it is open (the drop's lock waits, gives up
    after its timeout, and the run removes nothing), nor once it commits while its
    position is above the registered consumer's; it goes when the consumer has passed it.
    Seen red: with the sequencer call and the unplaced check removed from the drop
    (``postgres/_retention.py``), the prune right after the late commit dropped the
    partition with the late event in it (``assert 3 == 0``: 3 rows removed)."""
    await truncate(pg_module_dsn)
    clock = VirtualClock(T0)
    store = PostgresStore(pg_module_dsn, clock=clock)
    await store.open()
    late = await asyncpg.connect(pg_module_dsn)
    try:
        assert await store.prune_events(T0 - 10 * DAY, 100) == 0  # makes the partitions
        day = f"events_d{int(T0 // DAY)}"
        assert day in await _partitions(late, "events")
        await _commit_pages(store, ["a", "b"], T0)
        held = late.transaction()
        await held.start()
        await late.execute(
            "INSERT INTO events (shard, url_key, version, kind, created_at, payload, shard_pos)"
            " VALUES (1, '\\x01'::bytea, 1, 0, $1, '{}', courtier_take_shard_pos(1, 1))", T0)
        placed = await store.read_events(0, 10)
        assert [e.id for e in placed] == [1, 2]
        await store.advance_consumer("indexer", 2)
        clock.advance(3 * DAY)
        assert await store.prune_events(T0 + DAY, 100) == 0  # its lock is busy: next run
        assert await store.events_pruned_through() == 0
        assert day in await _partitions(late, "events")
        await held.commit()
        # committed now, not yet placed: the next prune places it (position 3), and the
        # consumer at 2 keeps the partition
        assert await store.prune_events(T0 + DAY, 100) == 0
        assert day in await _partitions(late, "events")
        [event] = await store.read_events(2, 10)
        assert (event.id, event.url_key) == (3, b"\x01")
        await store.advance_consumer("indexer", 3)
        assert await store.prune_events(T0 + DAY, 100) == 3
        assert day not in await _partitions(late, "events")
        assert await store.events_pruned_through() == 3
        assert await store.read_events(3, 10) == []
    finally:
        await late.close()
        await store.close()


async def test_an_existing_outbox_becomes_the_legacy_partition(pg_dsn: str) -> None:
    """A database at the schema before the partitions, with events (placed) and audit
    rows: after the migration both tables are partitioned, the old rows are the
    ``*_legacy`` partitions (bound: the day after tomorrow), positions and ids go on
    where they were, and the legacy partitions are dropped whole once their bound is
    older than the retention. Seen red: without ``OWNED BY NONE`` on the id sequences the
    legacy partition could not be dropped ("cannot drop table events_legacy because other
    objects depend on it": the new tables' ids come from its sequence)."""
    steps = _schema.load_migrations()
    [at] = [i for i, m in enumerate(steps) if m.name.endswith("_time_partitions.sql")]
    now = time.time()
    conn = await asyncpg.connect(pg_dsn)
    try:
        await _schema.migrate(conn, steps[:at])
        for n in range(5):
            await conn.execute(
                "INSERT INTO events (shard, url_key, version, kind, created_at, payload)"
                " VALUES (1, $1, 1, 0, $2, '{}')", bytes([n + 1]), now - DAY + n)
            await conn.execute(
                "INSERT INTO fetch_log (shard, url_key, version, fetched_at, outcome)"
                " VALUES (1, $1, 1, $2, 'ok')", bytes([n + 1]), now - DAY + n)
        placed = await conn.fetch("SELECT read_pos FROM courtier_read_events(0, 100)")
        assert [r[0] for r in placed] == [1, 2, 3, 4, 5]
    finally:
        await conn.close()
    clock = VirtualClock(now)
    store = PostgresStore(pg_dsn, clock=clock)
    await store.open()
    conn = await asyncpg.connect(pg_dsn)
    try:
        bound = (now // DAY + 2) * DAY
        legacy = await conn.fetch("SELECT name, hi FROM day_partitions"
                                  " WHERE name LIKE '%legacy' ORDER BY name")
        assert [(r[0], r[1]) for r in legacy] == [("events_legacy", bound),
                                                  ("fetch_log_legacy", bound)]
        assert [e.id for e in await store.read_events(0, 100)] == [1, 2, 3, 4, 5]
        await _commit_pages(store, ["after"], now)
        assert [e.id for e in await store.read_events(5, 100)] == [6]
        audit = await store.fetch_log(0, 100)
        assert [r["id"] for r in audit] == [1, 2, 3, 4, 5, 6]
        # a week after the legacy bound: both legacy partitions go whole
        clock.set(bound + 8 * DAY)
        assert await store.prune_events(clock.now() - 7 * DAY, 100) == 6
        assert await store.prune_audit(clock.now() - 7 * DAY, 100) == 6
        names = {r[0] for r in await conn.fetch("SELECT name FROM day_partitions")}
        assert not {"events_legacy", "fetch_log_legacy"} & names
        assert await conn.fetchval("SELECT to_regclass('events_legacy')") is None
        assert await store.events_pruned_through() == 6
        # the id sequences outlived their first tables
        await _commit_pages(store, ["later"], clock.now())
        assert [e.id for e in await store.read_events(6, 100)] == [7]
        assert [r["id"] for r in await store.fetch_log(0, 100)] == [7]
    finally:
        await conn.close()
        await store.close()


async def test_a_new_store_commits_its_first_day_into_a_day_partition(
        pg_module_dsn: str) -> None:
    """The store makes today's partitions when it opens, so the first commits of a new
    crawl go to a day partition (dropped whole by the retention), not to the default one
    (removed row by row: at a billion events a day, hours of DELETE). Seen red with the
    open's ``add_partitions`` call removed: the events sat in ``events_default`` and the
    retention run after them could not make that day's partition."""
    await truncate(pg_module_dsn)
    store = PostgresStore(pg_module_dsn, clock=VirtualClock(T0))
    await store.open()
    conn = await asyncpg.connect(pg_module_dsn)
    try:
        await _commit_pages(store, ["a", "b"], T0)
        day = int(T0 // DAY)
        for parent in ("events", "fetch_log"):
            assert f"{parent}_d{day}" in await _partitions(conn, parent)
        placed = await conn.fetch("SELECT tableoid::regclass::text AS part FROM events")
        assert [r["part"] for r in placed] == [f"events_d{day}"] * 2
        audit = await conn.fetch("SELECT tableoid::regclass::text AS part FROM fetch_log")
        assert {r["part"] for r in audit} == {f"fetch_log_d{day}"}
        # a second store opening on the same database finds them made (no error)
        again = PostgresStore(pg_module_dsn, clock=VirtualClock(T0))
        await again.open()
        await again.close()
    finally:
        await conn.close()
        await store.close()
