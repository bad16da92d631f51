"""What the outbox's two orders cost on PostgreSQL, per event, in the same run:

* **per-shard positions at commit** (migration 0031): the row trigger that takes each
  event's ``shard_pos`` from its shard's ``outbox_heads`` row. Measured as the time of
  commit-sized inserts of events (``--batch`` rows over as many shards, in (shard,
  url_key) order, one transaction each, ~600-byte payloads) with the trigger enabled,
  against the same inserts with it disabled, alternating batch by batch;
* **the crawl-wide sequencer** (``courtier_sequence_events``, what ``read_events`` and the
  retention run): the time of one run placing every event inserted, per event.

Times are the client's wall time on loopback (one connection; a round trip is in both
insert figures alike), medians over ``--rounds``. Usage: ``python
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

INSERT = (
    "INSERT INTO events (shard, url_key, version, created_at, payload)"
    " SELECT g % 1024, sha256((g + $3)::text::bytea), 1, $2, repeat(md5(g::text), 19)"
    " FROM generate_series($1::integer, $1::integer + $4 - 1) g"
    " ORDER BY 1, 2 ON CONFLICT DO NOTHING")


async def round_once(dsn: str, events: int, batch: int, salt: int) -> dict[str, float]:
    conn = await asyncpg.connect(dsn)
    try:
        spent = {"with trigger": 0.0, "without trigger": 0.0}
        now = time.time()
        for start in range(0, events, batch):
            with_trigger = (start // batch) % 2 == 0
            if not with_trigger:
                await conn.execute("ALTER TABLE events DISABLE TRIGGER events_shard_pos")
            t0 = time.perf_counter()
            async with conn.transaction():
                await conn.execute(INSERT, start, now, salt, batch)
            spent["with trigger" if with_trigger else "without trigger"] += (
                time.perf_counter() - t0)
            if not with_trigger:
                await conn.execute("ALTER TABLE events ENABLE TRIGGER events_shard_pos")
        half = events / 2
        t0 = time.perf_counter()
        placed = await conn.fetchval("SELECT courtier_sequence_events()")
        sequencer = time.perf_counter() - t0
        assert placed == events, (placed, events)
        return {"trigger µs/event": (spent["with trigger"] - spent["without trigger"])
                / half * 1e6,
                "insert without trigger µs/event": spent["without trigger"] / half * 1e6,
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
    print(f"sequencer / trigger: {medians['sequencer µs/event'] / medians['trigger µs/event']:.2f}")


async def _open(dsn: str) -> None:
    store = PostgresStore(dsn)
    await store.open()
    await store.close()


if __name__ == "__main__":
    main()
