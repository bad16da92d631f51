"""Index descents and server time of the two outbox statements that join a batch's keys
with ``events`` by shard (issue 29, branch ``tallyprobe``): plain PostgreSQL's commit
tally (``_event_counts._ADD_WRITTEN``) and the per-shard read's ranges
(``_shard_ranges``), each as this tree runs it and with the batch's shards also named as
``e.shard = ANY(…)`` beside the join (main's form; Citus's for the read).

On a new database of the server of tests/pg.py: ``--events`` events in one day partition
(30 a shard), ANALYZE, then for each batch size N, under the generic plan a pooled
connection's prepared statement settles on after its fifth run: N events written in the
transaction over N shards and the tally over them, and a read of N ranges of 10
positions; the descents counted from ``pg_stat_get_xact_numscans`` of the partitions'
indexes, the time the median of ``--reps`` calls (client wall time on loopback, the
round trip included). Rolled back after each N.

Usage: ``python bench/tally_scans.py [--sizes 50,150,300] [--reps 20]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.pg import temporary_database  # noqa: E402

from courtier.store.postgres import PostgresStore, _event_counts  # noqa: E402
from courtier.store.postgres._shard_ranges import ranges_query  # noqa: E402

NOW = 1_700_000_000.0
SCANS = ("SELECT coalesce(sum(pg_stat_get_xact_numscans(i.indexrelid)), 0) FROM pg_index i"
         " JOIN pg_inherits p ON p.inhrelid = i.indrelid WHERE p.inhparent = 'events'::regclass")
TALLY = _event_counts._ADD_WRITTEN
#: main's tally: the batch's shards (here $1, distinct) also named beside the join
TALLY_WITH_ARRAY = TALLY.replace("WHERE e.xid", "WHERE e.shard = ANY($1::integer[]) AND e.xid")
READ, READ_WITH_ARRAY = ranges_query(False), ranges_query(True)


async def measure(conn: asyncpg.Connection, sql: str, args: list[object], reps: int
                  ) -> tuple[int, float]:
    before = await conn.fetchval(SCANS)
    await conn.execute(sql, *args)
    descents = int(await conn.fetchval(SCANS) - before)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        await conn.execute(sql, *args)
        times.append(time.perf_counter() - t)
    return descents, 1000 * statistics.median(times)


async def run(dsn: str, events: int, sizes: list[int], reps: int) -> None:
    store = PostgresStore(dsn)
    await store.open()
    await store.close()
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "INSERT INTO events (shard, url_key, version, created_at, payload, shard_pos)"
            " SELECT g % 1024, decode(md5(g::text), 'hex'), 1, $1, '{}', g / 1024 + 1"
            " FROM generate_series(0, $2::integer - 1) g", NOW - 60, events)
        await conn.execute("ANALYZE events")
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        print("| N | statement | descents (with the array) | descents (without) |"
              " ms a call (with) | ms a call (without) |")
        print("|---|---|---|---|---|---|")
        for n in sizes:
            tr = conn.transaction()
            await tr.start()
            try:
                shards = list(range(n))
                keys = [f"k{n}-{s}".encode().ljust(16, b"\0") for s in shards]
                await conn.execute(
                    "INSERT INTO events (shard, url_key, version, created_at, payload,"
                    " shard_pos) SELECT s, k, 1, $3, '{}', 100000 FROM"
                    " unnest($1::integer[], $2::bytea[]) AS t(s, k)", shards, keys, NOW)
                xid = await conn.fetchval("SELECT pg_current_xact_id()")
                tally_args: list[object] = [shards, keys, [1] * n, [0] * n, NOW, xid, 0,
                                            [0], ["events"]]
                read_args: list[object] = [shards, [10] * n, [20] * n, -1]
                for label, with_array, without, args in (
                        ("tally", TALLY_WITH_ARRAY, TALLY, tally_args),
                        ("ranges read", READ_WITH_ARRAY, READ, read_args)):
                    d_with, t_with = await measure(conn, with_array, args, reps)
                    d_without, t_without = await measure(conn, without, args, reps)
                    print(f"| {n} | {label} | {d_with:,} | {d_without:,} | {t_with:.2f} |"
                          f" {t_without:.2f} |")
            finally:
                await tr.rollback()
    finally:
        await conn.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=30 * 1024)
    ap.add_argument("--sizes", default="50,150,300")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    with temporary_database("tally") as dsn:
        asyncio.run(run(dsn, a.events, [int(s) for s in a.sizes.split(",")], a.reps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
