"""What the outbox retention costs with and without the crawl-wide sequencer (issue 30).

Fills a PostgreSQL database (the current schema) with N outbox events of ~600 bytes in
1,024 shards, committed and never placed crawl-wide (``read_pos`` NULL, as in a crawl
whose readers all read by shard), in today's day partition, then times one
``prune_events`` call that removes them all once the day is old, two ways, alternating
on fresh fills:

* ``crawl-wide``: a crawl-wide consumer is registered (at a position above every one):
  the run places every event first (``courtier_sequence_events``: one ``UPDATE`` of each
  row, its window over them) and then drops the partition;
* ``by-shard``: no crawl-wide consumer (docs/scale-out.md, "By shard alone"): the run
  drops the partition without placing anything.

Prints the seconds of each run and the median ratio. Usage:
``python bench/prune_by_shard_bench.py [--events 200000] [--runs 3]``. Talks only to the
PostgreSQL server of tests/pg.py (127.0.0.1:5432 by default).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.pg import temporary_database

from courtier.core.clock import VirtualClock
from courtier.store.postgres import PostgresStore

DAY = 86_400.0
#: a day well inside the store clock's range, at its start (the partition of that day)
T0 = 20_000 * DAY


async def _fill(dsn: str, events: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "INSERT INTO events (shard, url_key, version, kind, created_at, payload,"
            " shard_pos) SELECT g % 1024, sha256(g::text::bytea), 1, 0, $2 + g * 0.0001,"
            " repeat(md5(g::text), 19), g / 1024 + 1 FROM generate_series(0, $1 - 1) g",
            events, T0 + 60)
        await conn.execute("INSERT INTO outbox_heads (shard, last_pos)"
                           " SELECT shard, max(shard_pos) FROM events GROUP BY shard")
        await conn.execute("VACUUM ANALYZE events")
    finally:
        await conn.close()


async def one(way: str, events: int, dsn: str) -> float:
    store = PostgresStore(dsn, clock=VirtualClock(T0))
    await store.open()
    try:
        await store.prune_events(T0 - 10 * DAY, 10)  # today's partitions, ahead
        await _fill(dsn, events)
        if way == "crawl-wide":
            await store.advance_consumer("wide", 2**62)
        started = time.perf_counter()
        removed = await store.prune_events(T0 + 3 * DAY, 10_000)
        took = time.perf_counter() - started
        left = (await store.counts())["events"]
    finally:
        await store.close()
    print(f"{way:>10}: {took:7.3f} s ({removed} removed by estimate, {left} left)",
          flush=True)
    assert left == 0, f"{way}: {left} events left"
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"crawl-wide": [], "by-shard": []}
    for _ in range(args.runs):
        for way in times:
            with temporary_database("prunebench") as dsn:
                times[way].append(asyncio.run(one(way, args.events, dsn)))
    wide, shard = (statistics.median(times[w]) for w in ("crawl-wide", "by-shard"))
    print(f"median: crawl-wide {wide:.3f} s, by-shard {shard:.3f} s, "
          f"by-shard / crawl-wide {shard / wide:.3f}")


if __name__ == "__main__":
    main()
