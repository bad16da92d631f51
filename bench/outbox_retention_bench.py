"""The cost of partitioning an existing crawl's outbox by time, and of removing a day.

Builds a PostgreSQL database at the schema before the time partitions with N outbox
events (payloads of ~600 bytes, as a fetch event with its links) and N audit rows, then
measures, in the same run and on the same server:

* the migration that makes ``events`` and ``fetch_log`` partitioned (the old tables are
  attached as ``*_legacy``: one read of each heap, nothing rewritten);
* the peer it replaces: copying the same rows into a new table (what converting by
  rewriting would cost at least, without its indexes);
* removing those rows once old enough: the retention's ``DROP TABLE`` of the legacy
  partition, against a ``DELETE`` of the same rows (on a second copy).

Prints the seconds of each and the ratios. Usage:
``python bench/outbox_retention_bench.py [--events 1000000]``. Talks only to the
PostgreSQL server of tests/pg.py (127.0.0.1:5432 by default).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.pg import temporary_database

from courtier.core.clock import VirtualClock
from courtier.store.postgres import PostgresStore, _schema

DAY = 86_400.0


async def _fill(conn: asyncpg.Connection, events: int, at: float) -> None:
    await conn.execute(
        "INSERT INTO events (shard, url_key, version, kind, created_at, payload, read_pos)"
        " SELECT g % 1024, sha256(g::text::bytea), 1, 0, $2 + g * 0.001,"
        " repeat(md5(g::text), 19), g FROM generate_series(1, $1) g", events, at)
    await conn.execute("UPDATE outbox_sequencer SET last_position = $1", events)
    await conn.execute(
        "INSERT INTO fetch_log (shard, url_key, version, fetched_at, status, outcome)"
        " SELECT g % 1024, sha256(g::text::bytea), 1, $2 + g * 0.001, 200, 'ok'"
        " FROM generate_series(1, $1) g", events, at)
    await conn.execute("VACUUM ANALYZE events")
    await conn.execute("VACUUM ANALYZE fetch_log")


async def run(dsn: str, events: int) -> dict[str, float]:
    steps = _schema.load_migrations()
    [at] = [i for i, m in enumerate(steps) if m.name.endswith("_time_partitions.sql")]
    start = time.time() - 2 * DAY
    conn = await asyncpg.connect(dsn)
    try:
        await _schema.migrate(conn, steps[:at])
        await _fill(conn, events, start)
        size = await conn.fetchval("SELECT pg_total_relation_size('events')")
        began = time.perf_counter()
        await conn.execute("CREATE TABLE events_copy (LIKE events)")
        await conn.execute("INSERT INTO events_copy SELECT * FROM events")
        copy_s = time.perf_counter() - began
        began = time.perf_counter()
        await _schema.migrate(conn, steps[:at + 1])
        migrate_s = time.perf_counter() - began
        began = time.perf_counter()
        await conn.execute("DELETE FROM events_copy")
        delete_s = time.perf_counter() - began
    finally:
        await conn.close()
    clock = VirtualClock(time.time() + 12 * DAY)
    store = PostgresStore(dsn, clock=clock)
    await store.open()
    try:
        began = time.perf_counter()
        removed = await store.prune_events(clock.now() - 7 * DAY, 10_000)
        drop_s = time.perf_counter() - began
    finally:
        await store.close()
    return {"events": float(events), "events_bytes": float(size), "copy_s": copy_s,
            "migrate_s": migrate_s, "delete_s": delete_s, "drop_s": drop_s,
            "removed": float(removed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    with temporary_database("retention_bench") as dsn:
        figures = asyncio.run(run(dsn, args.events))
    print(f"outbox: {figures['events']:,.0f} events, {figures['events_bytes'] / 1e6:,.0f} MB "
          "with indexes (and as many audit rows)")
    print(f"migration to day partitions (both tables): {figures['migrate_s']:.2f} s; "
          f"copying the events into a new table: {figures['copy_s']:.2f} s "
          f"(migration / copy = {figures['migrate_s'] / figures['copy_s']:.3f})")
    print(f"removing them: DROP of the legacy partition (prune_events) "
          f"{figures['drop_s']:.3f} s for {figures['removed']:,.0f} events; DELETE of the "
          f"copy {figures['delete_s']:.2f} s (drop / delete = "
          f"{figures['drop_s'] / figures['delete_s']:.4f})")


if __name__ == "__main__":
    main()
