"""Store benchmark: intake, refill latency, commit rate and RSS at growing sizes.

    python bench/store_bench.py --store sqlite:/tmp/sb/bench.sqlite --sizes 1000000
    python bench/store_bench.py --store postgresql://root@127.0.0.1:5432/bench ...

Prints figures and asserts nothing (targets: intake >= 50 k rows/s, refill of
10 k due URLs p99 < 100 ms at every size, commit >= 5 k results/s, RSS <= 1 GB).

Data: ``--hosts`` hosts (100 k); a host's key prefix, host_key and shard come
from ``courtier.urls.canonicalize`` (keys are host-clustered exactly as in a
crawl), the 12-byte URL part of each bulk-loaded key is random (it is a hash in
a crawl too). Known URLs are bulk-loaded to each size (store-specific fast path,
not timed); ``--due`` of them (1 M) are due within the last hour, the rest later.
Refill runs at two ``now`` values: one where about 10 k rows are due (no
backlog) and one where all ``--due`` rows are (a large backlog); after each run
the rows are released unchanged (not timed), so every run sees the same state.
``--baseline`` also times main's old ``load_due`` (one ranking of every due row)
on the same SQLite file.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import subprocess
import sys
import time
import types

from courtier.outcome import Outcome
from courtier.store.base import FetchCommit, NewUrl, Store
from courtier.store.sqlite import SqliteStore
from courtier.urls import SHARD_COUNT, canonicalize

T0 = 1_700_000_000.0
WANT = 10_000  # due URLs per refill
PER_HOST = 64  # the worker's host_window


def open_store(spec: str) -> Store:
    if spec.startswith(("postgresql://", "postgres://")):
        try:
            from courtier.store import postgres  # type: ignore[attr-defined]
        except ImportError:
            sys.exit("store_bench: --store postgresql://… needs the PostgreSQL store, which is "
                     "not on this branch (add its factory in open_store/bulk_fill)")
        return postgres.open_store(spec)  # type: ignore[no-any-return]  # pragma: no cover
    if not spec.startswith("sqlite:"):
        sys.exit(f"store_bench: --store {spec!r}: use sqlite:PATH or a postgresql:// URL")
    return SqliteStore(spec.removeprefix("sqlite:"))


def host_table(hosts: int) -> list[tuple[bytes, str, int]]:
    out = []
    for h in range(hosts):
        c = canonicalize(f"http://host{h}.bench{h % 97}.example/")
        out.append((c.url_key[:4], c.host_key, c.shard))
    return out


async def bulk_fill(store: Store, table: list[tuple[bytes, str, int]], start: int, stop: int,
                    due: int) -> None:
    """Known URLs number start..stop-1; the first ``due`` of all are due in [T0-3600, T0]."""
    if not isinstance(store, SqliteStore):
        raise SystemExit("store_bench: bulk fill is written for SQLite only so far")

    def job(conn: object) -> None:
        import sqlite3
        assert isinstance(conn, sqlite3.Connection)
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS bh (h INTEGER PRIMARY KEY, prefix BLOB,"
                     " host_key TEXT, shard INTEGER)")
        if conn.execute("SELECT COUNT(*) FROM bh").fetchone()[0] == 0:
            conn.executemany("INSERT INTO bh VALUES (?, ?, ?, ?)",
                             [(i, *row) for i, row in enumerate(table)])
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)"
            " INSERT OR IGNORE INTO urls (url_key, url, host_key, shard, depth, priority, state,"
            " version, discovered_at, next_fetch_at)"
            " SELECT CAST(bh.prefix || randomblob(12) AS BLOB), bh.host_key || '/p' || n.i,"
            " bh.host_key, bh.shard, 1 + n.i % 3, abs(random()) % 6, 0, 1, ?,"
            " CASE WHEN n.i < ? THEN ? - 3600.0 * ((n.i * 7919) % 1000003) / 1000003.0"
            " ELSE ? + 3600 + (n.i % 86400) END"
            " FROM n JOIN bh ON bh.h = n.i % ?",
            (start, stop, T0 - 86400, due, T0, T0, len(table)),
        )
        conn.execute(
            "INSERT OR REPLACE INTO host_queue (shard, host_key, next_due_at, best_priority)"
            " SELECT shard, host_key, MIN(next_fetch_at), MAX(priority) FROM urls"
            " WHERE state = 0 GROUP BY shard, host_key")
        conn.execute("COMMIT")

    await store._call(job)  # type: ignore[attr-defined]


def rss_mb() -> tuple[float, float]:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    current = pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    return current, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def refill_runs(store: Store, now: float, runs: int, old: object = None) -> list[float]:
    shards, times = list(range(SHARD_COUNT)), []
    for _ in range(runs):
        started = time.perf_counter()
        if old is None:
            due = await store.load_due(shards, now, WANT, PER_HOST)
        else:
            due = await store._tx("old", lambda c: old.load_due(  # type: ignore[attr-defined]
                c, shards, now, WANT, PER_HOST, ()))
        times.append((time.perf_counter() - started) * 1000)
        await store.release([(d.url_key, d.next_fetch_at) for d in due])
    return times


async def intake_rate(store: Store, table: list[tuple[bytes, str, int]], tag: str,
                      rows: int) -> float:
    rnd = random.Random(tag)
    batches, batch = [], []
    while sum(map(len, batches)) < rows:
        host = rnd.randrange(len(table))
        for i in range(50):  # one page's links, 10 pages per commit batch
            c = canonicalize(f"http://host{host}.bench{host % 97}.example/{tag}/{i}")
            batch.append(NewUrl(c.url_key, c.url, c.host_key, c.shard, 2, 0, T0 + 10**6, T0))
        if len(batch) >= 500:
            batches.append(batch)
            batch = []
    started = time.perf_counter()
    added = 0
    for b in batches:
        added += await store.add_urls(b)
    return added / (time.perf_counter() - started)


async def commit_rate(store: Store, epochs: dict[int, int]) -> float:
    due = await store.load_due(list(range(SHARD_COUNT)), T0, WANT, PER_HOST)
    commits = [FetchCommit(d.url_key, d.url, d.host_key, d.shard, d.version, epochs[d.shard],
                           Outcome.OK, T0, T0 + 86400, status=200) for d in due]
    started = time.perf_counter()
    for i in range(0, len(commits), 500):
        await store.commit(commits[i : i + 500])
    return len(commits) / (time.perf_counter() - started)


def old_load_due() -> object:
    src = subprocess.run(["git", "show", "main:src/courtier/store/sqlite/_queries.py"],
                         capture_output=True, text=True, check=True).stdout
    module = types.ModuleType("old_queries")
    exec(compile(src, "main:_queries.py", "exec"), module.__dict__)
    return module


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--due", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--intake-rows", type=int, default=50_000)
    parser.add_argument("--baseline", action="store_true", help="also time main's load_due")
    args = parser.parse_args()
    store = open_store(args.store)
    await store.open()
    table = host_table(args.hosts)
    epochs = await store.acquire_shards("bench", list(range(SHARD_COUNT)), T0, 10**9)
    small_now = T0 - 3600 + 3600 * WANT / args.due  # about WANT rows due
    known = 0
    print(f"store {args.store}  hosts {args.hosts}  due backlog {args.due}")
    for size in (int(s) for s in args.sizes.split(",")):
        started = time.perf_counter()
        await bulk_fill(store, table, known, size, args.due)
        known = size
        print(f"\n== {size:,} known URLs (bulk fill {time.perf_counter() - started:.0f} s)")
        rate = await intake_rate(store, table, f"i{size}", args.intake_rows)
        print(f"intake        {rate:10,.0f} new rows/s (batches of 500 = 10 pages x 50 links)")
        for label, now in (("~10k due", small_now), (f"{args.due:,} due", T0)):
            times = await refill_runs(store, now, args.runs)
            print(f"refill 10k    {label:>12}: p50 {pct(times, .5):7.1f} ms"
                  f"  p99 {pct(times, .99):7.1f} ms  ({args.runs} runs)")
            if args.baseline:
                old = old_load_due()
                times = await refill_runs(store, now, max(3, args.runs // 10), old)
                print(f"  old load_due {label:>11}: p50 {pct(times, .5):7.1f} ms"
                      f"  p99 {pct(times, .99):7.1f} ms")
        print(f"commit        {await commit_rate(store, epochs):10,.0f} results/s (batches of 500)")
        current, peak = rss_mb()
        print(f"RSS           {current:7.0f} MB now, {peak:7.0f} MB peak (bench process: store"
              " connection + 10k leased rows + host table)")
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
