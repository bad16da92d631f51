"""Store benchmark: intake, refill latency and commit rate at growing sizes, both stores.

    python bench/store_bench.py --store sqlite:/tmp/sb/bench.sqlite --sizes 1000000
    python bench/store_bench.py --store postgresql://root@127.0.0.1:5432/bench --sizes 1000000
    python bench/store_bench.py --citus --sizes 1000000,3000000 --runs 5 --figures-out

The target must be new: a SQLite path that does not exist, or a PostgreSQL
database that does not exist yet (it is created) or holds no URLs; or, with
``--reuse``, a database an earlier run filled and left (measured as it is, after a
fill's caches and load have settled). Prints
figures and asserts nothing (targets: intake >= 50 k rows/s, refill of 10 k due
URLs p99 < 100 ms at every size, commit >= 5 k results/s).

Data: ``--hosts`` hosts (100 k); a host's key prefix, host_key and shard come
from ``courtier.core.urls.canonicalize`` (keys are host-clustered exactly as in a
crawl), the 12-byte URL part of each bulk-loaded key is random (it is a hash in
a crawl too). Known URLs are bulk-loaded to each size (``bench/store_fill.py``,
not timed); ``--due`` of them (1 M) are due within the last hour, the rest later;
priorities 0..5. Refill (10 k rows, 64 per host, every shard) runs in two
regimes: ``now`` where about 10 k rows are due (about one due row on each of
10 k hosts) and ``now`` where all ``--due`` rows are (about ten due per host, a
large backlog); after each run the rows are released unchanged (not timed), so
every run sees the same state; ``read_due`` (the worker's refill, nothing written) is
timed in both regimes too.

``--citus`` (no ``--store``): plain PostgreSQL against Citus in one run, on throwaway
servers the bench starts and removes (``bench_databases.py``: one server, and a
coordinator with two worker nodes, the same settings on each). Each size is filled and
measured on the plain server, then on the cluster; the figures of each phase come with
the database CPU it cost (every process of every server, from /proc), then the ratios
Citus / PostgreSQL. ``--figures-out [FILE]`` writes the Citus cluster's commit and
intake rates per worker node into the figures file ``courtier plan`` reads (default: the
one the package ships), keeping its other figures; it is written after each size, so the
last size measured is the one kept.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench_databases import Databases, plain_and_citus
from record_figures import SHIPPED as SHIPPED_FIGURES
from record_figures import write_store_figures
from store_fill import HostRow, bulk_fill, prepare_target

from courtier.core.outcome import Outcome
from courtier.core.urls import SHARD_COUNT, canonicalize
from courtier.store.base import FetchCommit, NewUrl, Store
from courtier.store.postgres import PostgresStore
from courtier.store.sqlite import SqliteStore

T0 = 1_700_000_000.0
WANT = 10_000  # due URLs per refill
PER_HOST = 64  # the worker's host_window


def open_store(spec: str, durability: str) -> Store:
    if spec.startswith(("postgresql://", "postgres://")):
        return PostgresStore(spec)
    if not spec.startswith("sqlite:"):
        sys.exit(f"store_bench: --store {spec!r}: use sqlite:PATH or a postgresql:// URL")
    return SqliteStore(Path(spec.removeprefix("sqlite:")), durability=durability)


def host_table(hosts: int) -> list[HostRow]:
    out = []
    for h in range(hosts):
        c = canonicalize(f"http://host{h}.bench{h % 97}.example/")
        out.append((c.url_key[:4], c.host_key, c.shard))
    return out


def rss_mb() -> tuple[float, float]:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    current = pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    return current, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def refill_runs(store: Store, now: float, runs: int,
                      read_only: bool = False) -> tuple[list[float], int]:
    """``runs`` refills of ``WANT`` rows: ``load_due`` (marking; the rows released after
    each, not timed) or ``read_due`` (the worker's refill, nothing written)."""
    shards, times, got = list(range(SHARD_COUNT)), [], 0
    for _ in range(runs):
        started = time.perf_counter()
        if read_only:
            due = await store.read_due(shards, now, WANT, PER_HOST)
        else:
            due = await store.load_due(shards, now, WANT, PER_HOST)
        times.append((time.perf_counter() - started) * 1000)
        got = len(due)
        if not read_only:
            await store.release([(d.url_key, d.next_fetch_at) for d in due])
    return times, got


def intake_batches(table: list[HostRow], tag: str, rows: int) -> list[list[NewUrl]]:
    """Batches of 500 new URLs = 10 pages x 50 links, each page's links on one host."""
    rnd = random.Random(tag)
    batches: list[list[NewUrl]] = []
    batch: list[NewUrl] = []
    while len(batches) * 500 < rows:
        host = rnd.randrange(len(table))
        for i in range(50):
            c = canonicalize(f"http://host{host}.bench{host % 97}.example/{tag}/{i}")
            batch.append(NewUrl(c.url_key, c.url, c.host_key, c.shard, 2, rnd.randrange(6),
                                T0 + 10**6, T0))
        if len(batch) >= 500:
            batches.append(batch)
            batch = []
    return batches


async def intake_rate(store: Store, batches: list[list[NewUrl]]) -> float:
    started = time.perf_counter()
    added = 0
    for b in batches:
        added += await store.add_urls(b)
    return added / (time.perf_counter() - started)


async def commit_rate(store: Store, epochs: dict[int, int],
                      links: int) -> tuple[float, int]:
    """Commit 10 k leased rows in batches of 500; each result carries ``links`` new URLs."""
    due = await store.load_due(list(range(SHARD_COUNT)), T0, WANT, PER_HOST)
    commits = []
    for n, d in enumerate(due):
        new = []
        for i in range(links):
            c = canonicalize(f"http://{d.host_key.split('/')[-1]}/c{n}/{i}")
            new.append(NewUrl(c.url_key, c.url, c.host_key, c.shard, d.depth + 1, 1,
                              T0 + 10**6, T0))
        commits.append(FetchCommit(d.url_key, d.url, d.host_key, d.shard, d.version,
                                   epochs[d.shard], Outcome.OK, T0, T0 + 86400, status=200,
                                   new_urls=new))
    started = time.perf_counter()
    for i in range(0, len(commits), 500):
        await store.commit(commits[i : i + 500])
    return len(commits) / (time.perf_counter() - started), len(commits)


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def cpu_note(cpu: Callable[[], float] | None, before: float, count: int, unit: str) -> str:
    """The database's CPU since ``before`` per ``unit`` ("" without a CPU reading)."""
    if cpu is None:
        return ""
    return f"  database CPU {1e6 * (cpu() - before) / max(1, count):7.1f} µs a {unit}"


async def measure(store: Store, table: list[HostRow], args: argparse.Namespace,
                  epochs: dict[int, int], tag: str, label: str = "",
                  cpu: Callable[[], float] | None = None) -> dict[str, float]:
    """Intake, refill and commit on ``store`` as it is; the figures (rates per second;
    with ``cpu``, the database's CPU-seconds per row of each)."""
    small_now = T0 - 3600 + 3600 * WANT / args.due  # about WANT rows due
    out: dict[str, float] = {}
    clock = cpu or (lambda: 0.0)
    before = clock()
    rate = await intake_rate(store, intake_batches(table, tag, args.intake_rows))
    out["intake_rows_per_second"] = rate
    out["intake_cpu_s_per_row"] = (clock() - before) / args.intake_rows
    print(f"{label}intake        {rate:10,.0f} new rows/s (batches of 500 = 10 pages x 50"
          f" links){cpu_note(cpu, before, args.intake_rows, 'row')}", flush=True)
    for regime, now, per_host in (("~1 due/host", small_now, 1), ("~10 due/host", T0, 10)):
        for name, reading in (("load_due", False), ("read_due", True)):
            before = clock()
            times, got = await refill_runs(store, now, args.runs, read_only=reading)
            key = f"{name}_{per_host}_due_per_host"
            out[f"{key}_rows_per_second"] = got / (pct(times, .5) / 1000)
            rows = got * args.runs
            out[f"{key}_cpu_s_per_row"] = (clock() - before) / max(1, rows)
            print(f"{label}{name:<9} 10k {regime:>12}: p50 {pct(times, .5):7.1f} ms"
                  f"  p99 {pct(times, .99):7.1f} ms  ({args.runs} runs, {got} rows,"
                  f" {got / (pct(times, .5) / 1000):8,.0f} rows/s at p50)"
                  f"{cpu_note(cpu, before, rows, 'row')}", flush=True)
    before = clock()
    rate, results = await commit_rate(store, epochs, args.commit_links)
    out["commit_results_per_second"] = rate
    out["commit_cpu_s_per_result"] = (clock() - before) / max(1, results)
    print(f"{label}commit        {rate:10,.0f} results/s (batches of 500,"
          f" {args.commit_links} new URLs each){cpu_note(cpu, before, results, 'result')}",
          flush=True)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", help="sqlite:PATH or postgresql://…/db")
    parser.add_argument("--citus", action="store_true",
                        help="no --store: plain PostgreSQL against Citus in this run, each on"
                        " throwaway servers of the bench's own (bench/bench_databases.py)")
    parser.add_argument("--figures-out", type=Path, nargs="?", const=SHIPPED_FIGURES,
                        help="with --citus: write the per-node figures `courtier plan` reads"
                        " into this figures file (default: the one the package ships)")
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--due", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--intake-rows", type=int, default=50_000)
    parser.add_argument("--commit-links", type=int, default=0,
                        help="new URLs carried by each committed result (0)")
    parser.add_argument("--durability", choices=("normal", "full"), default="normal",
                        help="SQLite synchronous level (PostgreSQL is always synchronous)")
    parser.add_argument("--reuse", action="store_true",
                        help="measure a database an earlier run filled (no fill; --sizes"
                        " is ignored): warm caches, a quiet machine, more runs")
    args = parser.parse_args()
    if args.citus:
        await citus_against_plain(args)
        return
    if args.store is None:
        parser.error("give --store, or --citus")
    if not args.reuse:
        await prepare_target(args.store)
    store = open_store(args.store, args.durability)
    await store.open()
    table = host_table(args.hosts)
    epochs = await store.acquire_shards("bench", list(range(SHARD_COUNT)), T0, 10**9)
    known = 0
    print(f"store {args.store.split('@')[-1]}  hosts {args.hosts:,}  due {args.due:,}"
          f"  load average {load_average()}")
    sizes = [-1] if args.reuse else [int(s) for s in args.sizes.split(",")]
    for size in sizes:
        started = time.perf_counter()
        if size < 0:
            tag = f"r{time.time_ns()}"  # new keys on every reuse
            # not counted: a full scan of a large table would push the indexes out of cache
            print(f"\n== the database as an earlier run left it (load average"
                  f" {load_average()})", flush=True)
        else:
            await bulk_fill(args.store, table, known, size, args.due, T0)
            known, tag = size, f"i{size}"
            print(f"\n== {size:,} known URLs (bulk fill {time.perf_counter() - started:.0f} s,"
                  f" load average {load_average()})", flush=True)
        await measure(store, table, args, epochs, tag)
        known += args.intake_rows + WANT * args.commit_links
        current, peak = rss_mb()
        print(f"bench RSS     {current:7.0f} MB now, {peak:7.0f} MB peak"
              f"  (load average {load_average()})", flush=True)
    await store.close()


async def citus_against_plain(args: argparse.Namespace) -> None:
    """Each size on plain PostgreSQL, then on Citus (coordinator + 2 worker nodes), in
    one run; the ratios Citus / PostgreSQL, and the database CPU of every server."""
    table = host_table(args.hosts)
    with plain_and_citus() as backends:
        opened: list[tuple[Databases, str, Store, dict[int, int]]] = []
        for databases in backends:
            dsn = await databases.create("courtier_bench")
            store = PostgresStore(dsn)
            await store.open()
            epochs = await store.acquire_shards("bench", list(range(SHARD_COUNT)), T0, 10**9)
            opened.append((databases, dsn, store, epochs))
        print(f"plain PostgreSQL (1 server) against Citus (coordinator + "
              f"{backends[1].nodes} worker nodes), throwaway servers of this run;"
              f" hosts {args.hosts:,}  due {args.due:,}  load average {load_average()}")
        known = 0
        results: dict[int, dict[str, dict[str, float]]] = {}
        try:
            for size in (int(s) for s in args.sizes.split(",")):
                results[size] = {}
                for databases, dsn, store, epochs in opened:
                    started = time.perf_counter()
                    await bulk_fill(dsn, table, known, size, args.due, T0)
                    print(f"\n== {databases.label}, {size:,} known URLs (bulk fill"
                          f" {time.perf_counter() - started:.0f} s, load average"
                          f" {load_average()})", flush=True)
                    figures = await measure(store, table, args, epochs, f"i{size}",
                                            f"{databases.label:<10} ", databases.cpu_s)
                    figures["load_average"] = os.getloadavg()[0]
                    results[size][databases.label] = figures
                known = size + args.intake_rows + WANT * args.commit_links
                print_ratios(size, results[size])
                if args.figures_out is not None:  # each size's, so a run cut short keeps one
                    write_store_figures(args.figures_out, results[size], size,
                                        backends[1].nodes, " ".join(sys.argv[1:]))
        finally:
            for _, _, store, _ in opened:
                await store.close()


def print_ratios(size: int, figures: dict[str, dict[str, float]]) -> None:
    plain, citus = figures["PostgreSQL"], figures["Citus"]
    print(f"\n== Citus / PostgreSQL at {size:,} known URLs (same run):")
    for key in plain:
        if key != "load_average":
            print(f"  {key:<40} {citus[key] / plain[key]:6.2f}"
                  f"   ({plain[key]:,.6g} → {citus[key]:,.6g})")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    asyncio.run(main())
