"""What the outbox's two orders cost on PostgreSQL, per event, in the same run:

* **per-shard positions at commit** (migration 0032): the commit's upsert of the round's
  shards' ``outbox_heads`` rows and the events numbered from them (the statement shape
  of ``courtier_commit``). Measured as the time of commit-sized inserts of events
  (``--batch`` rows over as many shards, in (shard, url_key) order, one transaction
  each, ~600-byte payloads) with the heads, against the same inserts naming positions
  without them, alternating batch by batch;
* **the crawl-wide sequencer** (``courtier_sequence_events``, what ``read_events`` and the
  retention run): the time of one run placing every event inserted, per event.

Times are the client's wall time on loopback of the statements (one connection; a round
trip is in both insert figures alike; each transaction's commit is left out), medians
over ``--rounds``. Usage: ``python
bench/outbox_positions_bench.py [--events 20000] [--batch 50] [--rounds 3]``. Talks only
to the PostgreSQL server of tests/pg.py (127.0.0.1:5432 by default).
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

from courtier.store.postgres import PostgresStore

ROWS = ("SELECT g % 1024 AS shard, sha256((g + $3)::text::bytea) AS url_key,"
        " repeat(md5(g::text), 19) AS payload"
        " FROM generate_series($1::integer, $1::integer + $4 - 1) g")
#: the commit's statement shape since migration 0032 (courtier_commit's CTEs)
WITH_HEADS = (
    f"WITH done AS ({ROWS}), counted AS (SELECT d.shard, count(*) AS n FROM done d"
    " GROUP BY d.shard), heads AS (INSERT INTO outbox_heads AS h (shard, last_pos)"
    " SELECT c.shard, c.n FROM counted c ORDER BY c.shard ON CONFLICT (shard) DO UPDATE"
    " SET last_pos = h.last_pos + EXCLUDED.last_pos RETURNING h.shard, h.last_pos)"
    " INSERT INTO events (shard, url_key, version, created_at, payload, shard_pos)"
    " SELECT d.shard, d.url_key, 1, $2, d.payload, hd.last_pos - c.n + row_number()"
    " OVER (PARTITION BY d.shard ORDER BY d.url_key) FROM done d"
    " JOIN counted c ON c.shard = d.shard JOIN heads hd ON hd.shard = d.shard"
    " ORDER BY d.shard, d.url_key ON CONFLICT DO NOTHING")
#: the same insert without the heads (positions named outright: what it costs without)
WITHOUT_HEADS = (
    f"WITH done AS ({ROWS}) INSERT INTO events (shard, url_key, version, created_at,"
    " payload, shard_pos) SELECT d.shard, d.url_key, 1, $2, d.payload, 1 FROM done d"
    " ORDER BY d.shard, d.url_key ON CONFLICT DO NOTHING")


async def round_once(dsn: str, events: int, batch: int, salt: int) -> dict[str, float]:
    conn = await asyncpg.connect(dsn)
    try:
        spent = {"with heads": 0.0, "without heads": 0.0}
        now = time.time()
        for start in range(0, events, batch):
            with_heads = (start // batch) % 2 == 0
            async with conn.transaction():  # the statement's time, not the commit's flush
                t0 = time.perf_counter()
                await conn.execute(WITH_HEADS if with_heads else WITHOUT_HEADS,
                                   start, now, salt, batch)
                spent["with heads" if with_heads else "without heads"] += (
                    time.perf_counter() - t0)
        half = events / 2
        t0 = time.perf_counter()
        placed = await conn.fetchval("SELECT courtier_sequence_events()")
        sequencer = time.perf_counter() - t0
        assert placed == events, (placed, events)
        return {"heads µs/event": (spent["with heads"] - spent["without heads"]) / half * 1e6,
                "insert without heads µs/event": spent["without heads"] / half * 1e6,
                "sequencer µs/event": sequencer / events * 1e6}
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: list[dict[str, float]] = []
    with temporary_database("positions") as dsn:
        asyncio.run(_open(dsn))
        for salt in range(args.rounds):
            results.append(asyncio.run(round_once(dsn, args.events, args.batch, salt)))
            print("round", salt + 1, {k: round(v, 1) for k, v in results[-1].items()},
                  flush=True)
    medians = {k: statistics.median(r[k] for r in results) for k in results[0]}
    print("median", {k: round(v, 1) for k, v in medians.items()})
    print(f"sequencer / heads: {medians['sequencer µs/event'] / medians['heads µs/event']:.2f}")


async def _open(dsn: str) -> None:
    store = PostgresStore(dsn)
    await store.open()
    await store.close()


if __name__ == "__main__":
    main()
