"""What an event and an audit row cost PostgreSQL's indexes, and what the crawl-wide
sequencer costs an event it places, for this tree and others (``--tree``), alternating.

Each round, for each tree, in a child process whose ``courtier`` is that tree's
(``PYTHONPATH``), on a new database of the server of tests/pg.py with that tree's schema:

* ``--events`` events inserted in commit-sized batches (``--batch`` rows over as many
  shards, one transaction each, the statement shape of ``courtier_commit``: the heads'
  upsert, positions from them; ~600-byte payloads), and as many audit rows (the commit's
  insert of fetch_log), timed per row (client wall time of the statements, the commits'
  flush left out);
* the index entries and bytes an event and an audit row leave before any crawl-wide
  reader runs (every index of every partition: B-tree entries from ``pg_class.reltuples``
  after ANALYZE, bytes from ``pg_relation_size``);
* the sequencer (``courtier_sequence_events``): one run placing those events, then
  ``--events`` more inserted with a call after every ``--poll`` batches (a crawl-wide
  reader polling); µs per event placed.

Usage: ``python bench/sequencer_bench.py --tree main=/path/to/src [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.pg import temporary_database  # noqa: E402

ROWS = ("SELECT (g * 7) % 1024 AS shard, sha256((g + $3)::text::bytea) AS url_key,"
        " repeat(md5(g::text), 19) AS payload"
        " FROM generate_series($1::integer, $1::integer + $4 - 1) g")
#: courtier_commit's events insert since migration 0032 (its CTEs)
EVENTS = (
    f"WITH done AS ({ROWS}), counted AS (SELECT d.shard, count(*) AS n FROM done d"
    " GROUP BY d.shard), heads AS (INSERT INTO outbox_heads AS h (shard, last_pos)"
    " SELECT c.shard, c.n FROM counted c ORDER BY c.shard ON CONFLICT (shard) DO UPDATE"
    " SET last_pos = h.last_pos + EXCLUDED.last_pos RETURNING h.shard, h.last_pos)"
    " INSERT INTO events (shard, url_key, version, created_at, payload, shard_pos)"
    " SELECT d.shard, d.url_key, 1, $2, d.payload, hd.last_pos - c.n + row_number()"
    " OVER (PARTITION BY d.shard ORDER BY d.url_key) FROM done d"
    " JOIN counted c ON c.shard = d.shard JOIN heads hd ON hd.shard = d.shard"
    " ORDER BY d.shard, d.url_key ON CONFLICT DO NOTHING")
#: the commit's audit insert (one row a result)
AUDIT = (
    "INSERT INTO fetch_log (shard, url_key, version, fetched_at, status, outcome,"
    " robots_digest, delay_applied, error_kind) SELECT (g * 7) % 1024,"
    " sha256((g + $3)::text::bytea), 1, $2, 200, 'ok', md5(g::text), 0.0, NULL"
    " FROM generate_series($1::integer, $1::integer + $4 - 1) g")
#: each table's indexes over its partitions: B-tree or not, entries (B-tree: live index
#: tuples after ANALYZE), bytes
INDEXES = (
    "SELECT p.relname, am.amname = 'btree', sum(ic.reltuples)::float8,"
    " sum(pg_relation_size(ic.oid))::float8 FROM pg_inherits i"
    " JOIN pg_class p ON p.oid = i.inhparent JOIN pg_index x ON x.indrelid = i.inhrelid"
    " JOIN pg_class ic ON ic.oid = x.indexrelid JOIN pg_am am ON am.oid = ic.relam"
    " WHERE p.relname IN ('events', 'fetch_log') GROUP BY 1, 2")


async def _insert(conn: asyncpg.Connection, start: int, count: int, batch: int,
                  spent: dict[str, float]) -> None:
    """``count`` events and audit rows from number ``start``, in batches, timed."""
    now = time.time()
    for first in range(start, start + count, batch):
        for table, sql in (("events", EVENTS), ("fetch_log", AUDIT)):
            async with conn.transaction():
                t0 = time.perf_counter()
                await conn.execute(sql, first, now, 0, batch)
                spent[table] += time.perf_counter() - t0


async def _sequence(conn: asyncpg.Connection) -> tuple[int, float]:
    t0 = time.perf_counter()
    placed = int(await conn.fetchval("SELECT courtier_sequence_events()"))
    return placed, time.perf_counter() - t0


async def _measure(dsn: str, events: int, batch: int, poll: int) -> dict[str, float]:
    from courtier.store.postgres import PostgresStore  # the tree's (PYTHONPATH)

    store = PostgresStore(dsn)
    await store.open()
    await store.close()
    conn = await asyncpg.connect(dsn)
    try:
        spent = {"events": 0.0, "fetch_log": 0.0}
        # no crawl-wide reader: the events as the commit leaves them
        await _insert(conn, 0, events, batch, spent)
        await conn.execute("ANALYZE events; ANALYZE fetch_log")
        sizes = {(r[0], r[1]): (r[2], r[3]) for r in await conn.fetch(INDEXES)}
        placed, one_run = await _sequence(conn)
        assert placed == events, (placed, events)
        # a crawl-wide reader polling: the sequencer after every `poll` batches
        polled, polling = 0, 0.0
        for first in range(events, 2 * events, batch * poll):
            await _insert(conn, first, min(batch * poll, 2 * events - first), batch, spent)
            placed, took = await _sequence(conn)
            polled, polling = polled + placed, polling + took
        assert polled == events, (polled, events)

        def per(table: str, btree: bool, column: int) -> float:
            return sizes.get((table, btree), (0.0, 0.0))[column] / events

        return {"event insert µs": spent["events"] / events / 2 * 1e6,
                "audit insert µs": spent["fetch_log"] / events / 2 * 1e6,
                "sequencer µs/event, one run": one_run / events * 1e6,
                "sequencer µs/event, polled": polling / events * 1e6,
                "B-tree entries/event": per("events", True, 0),
                "index B/event": per("events", True, 1) + per("events", False, 1),
                "B-tree entries/audit row": per("fetch_log", True, 0),
                "B-tree B/audit row": per("fetch_log", True, 1),
                "BRIN B/audit row": per("fetch_log", False, 1)}
    finally:
        await conn.close()


def _child(args: argparse.Namespace) -> None:
    with temporary_database("seqbench") as dsn:
        result = asyncio.run(_measure(dsn, args.events, args.batch, args.poll))
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--poll", type=int, default=4, help="batches between sequencer calls")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tree", action="append", default=[], metavar="LABEL=SRC")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    trees = [tuple(t.split("=", 1)) for t in args.tree] + [("this", str(ROOT / "src"))]
    results: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
    for r in range(args.rounds):
        order = trees if r % 2 == 0 else trees[::-1]
        for label, src in order:
            env = {**os.environ, "PYTHONPATH": src}
            out = subprocess.run(
                [sys.executable, __file__, "--child", "--events", str(args.events),
                 "--batch", str(args.batch), "--poll", str(args.poll)],
                env=env, check=True, capture_output=True, text=True, timeout=1800).stdout
            results[label].append(json.loads(out.strip().splitlines()[-1]))
            print("round", r + 1, label,
                  {k: round(v, 1) for k, v in results[label][-1].items()}, flush=True)
    for label, rows in results.items():
        print("median", label, {k: round(statistics.median(x[k] for x in rows), 2)
                                for k in rows[0]})


if __name__ == "__main__":
    main()
