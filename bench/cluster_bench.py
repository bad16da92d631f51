"""One worker vs N workers on the same CPU-bound farm: pages/s and CPU per page.

The farm is the static benchmark web (bench/static_web.py: 1,000 hosts by
default) or, with ``--realistic`` / ``--web-dir DIR``, the realistic web
(bench/realistic_web.py: robots.txt answering 404 and 500, Crawl-delay hosts,
sitemaps, redirects, broken links, duplicates; judged per host by its own robots.txt
and Crawl-delay), served by a local nginx, delay 0, so the crawler's CPU is the limit.
Each run gets a fresh PostgreSQL database on 127.0.0.1 and runs
``courtier crawl --workers K`` to the end; pages are counted from nginx's access
log (the independent observer), CPU from the children's rusage. The shards a
join or a leave moves are computed from the rendezvous hashing the workers use.

    .venv/bin/python bench/cluster_bench.py --hosts 1000 --pages 5 --workers 1 --workers 2
    .venv/bin/python bench/cluster_bench.py --hosts 300 --pages 10 --workers 1 --citus
    .venv/bin/python bench/cluster_bench.py --hosts 1000 --pages 20 --workers 1 --plain-server \
        --web-dir /tmp/web1000 --sqlite-baseline --repeat 3

Prints one line per run and the ratio of K workers to 1 (the machine may be shared:
the load average before and after each run is printed with it); with
``--sqlite-baseline`` each round also crawls the same web with one process on the
embedded SQLite store and prints the crawler's own CPU per page on PostgreSQL against it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import asyncpg

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT / "src"))

import access_log  # noqa: E402
import realistic_web  # noqa: E402
import static_web  # noqa: E402
from bench_databases import Databases, plain_and_citus, plain_only  # noqa: E402
from nginx_local import LocalNginx, free_port  # noqa: E402
from record_figures import SHIPPED, write_database_store  # noqa: E402
from store_sizes import postgres_sizes, sqlite_sizes  # noqa: E402

from courtier.cluster.rendezvous import target_owners  # noqa: E402
from courtier.store.postgres import PostgresStore  # noqa: E402

ADMIN = "postgresql://root@127.0.0.1:5432/postgres"
ADMIN_DSN = [ADMIN]  # --admin-dsn replaces it


async def _database_stats(dsn: str) -> str:
    """The run database's time per function (``track_functions``) and row changes per table."""
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        funcs = await conn.fetch(
            "SELECT funcname, calls, round(total_time::numeric, 1) AS total_ms,"
            " round(self_time::numeric, 1) AS self_ms FROM pg_stat_user_functions"
            " ORDER BY total_time DESC")
        tables = await conn.fetch(
            "SELECT relname, sum(n_tup_ins) AS ins, sum(n_tup_upd) AS upd,"
            " sum(n_tup_hot_upd) AS hot, sum(n_tup_del) AS del FROM pg_stat_user_tables"
            " GROUP BY relname HAVING sum(n_tup_ins + n_tup_upd + n_tup_del) > 0"
            " ORDER BY 3 DESC")
        indexes = await conn.fetch(
            "SELECT COALESCE(pt.relname, i.relname) AS tab,"
            " COALESCE(pi.relname, i.indexrelname) AS idx, sum(i.idx_scan) AS scans,"
            " sum(i.idx_tup_read) AS tup_read FROM pg_stat_user_indexes i"
            " LEFT JOIN pg_inherits ii ON ii.inhrelid = i.indexrelid"
            " LEFT JOIN pg_class pi ON pi.oid = ii.inhparent"
            " LEFT JOIN pg_inherits ti ON ti.inhrelid = i.relid"
            " LEFT JOIN pg_class pt ON pt.oid = ti.inhparent"
            " GROUP BY 1, 2 ORDER BY 1, 3 DESC")
        xacts = await conn.fetchrow(
            "SELECT xact_commit, xact_rollback, tup_returned, tup_fetched, tup_inserted,"
            " tup_updated FROM pg_stat_database WHERE datname = current_database()")
    finally:
        await conn.close()
    lines = [" ".join(f"{k}={v}" for k, v in xacts.items()), "function calls total_ms self_ms"]
    lines += [f"{r['funcname']} {r['calls']} {r['total_ms']} {r['self_ms']}" for r in funcs]
    lines += ["", "table inserted updated hot_updated deleted"]
    lines += [f"{r['relname']} {r['ins']} {r['upd']} {r['hot']} {r['del']}" for r in tables]
    lines += ["", "table index scans tuples_read (summed over partitions)"]
    lines += [f"{r['tab']} {r['idx']} {r['scans']} {r['tup_read']}" for r in indexes]
    return "\n".join(lines) + "\n"


async def _schema(dsn: str) -> None:
    store = PostgresStore(dsn)
    await store.open()
    await store.close()


#: the schema made by the source tree under test (``--tree``: an older tree refuses a
#: database a newer one migrated), in a process of its own
_SCHEMA_SCRIPT = ("import asyncio, sys\n"
                  "from courtier.store.postgres import PostgresStore\n"
                  "async def main():\n"
                  "    store = PostgresStore(sys.argv[1])\n"
                  "    await store.open()\n"
                  "    await store.close()\n"
                  "asyncio.run(main())\n")


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(ADMIN_DSN[0], timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def shards_moved() -> list[tuple[str, int]]:
    """Shards that change owner when a worker joins (N → N+1) or leaves (N → N-1)."""
    out = []
    for n in (1, 2, 3, 4, 7):
        before = target_owners(range(1024), {f"w{i}": 1.0 for i in range(n)})
        after = target_owners(range(1024), {f"w{i}": 1.0 for i in range(n + 1)})
        out.append((f"join {n}→{n + 1}", sum(before[s] != after[s] for s in range(1024))))
        left = target_owners(range(1024), {f"w{i}": 1.0 for i in range(n + 1) if i != 0})
        out.append((f"leave {n + 1}→{n}", sum(after[s] != left[s] for s in range(1024))))
    return out


def machine_busy_s() -> tuple[float, float]:
    """CPU-seconds spent by the whole machine so far (every process: the workers,
    nginx, PostgreSQL and anything else) and of them stolen by the hypervisor (time
    this virtual machine wanted a core and another guest had it), from /proc/stat."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(f) for f in fields]
    idle = ticks[3] + ticks[4]  # idle + iowait
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(ticks[:8]) - idle) / tick, ticks[7] / tick


class ServerCpu:
    """CPU-seconds of this run's PostgreSQL backends (those of its database, plus the
    server's WAL writer, checkpointer and background writer) and of nginx, sampled from
    /proc every 0.2 s while the run lasts (a backend that exits between two samples
    loses at most one period)."""

    SHARED = ("walwriter", "checkpointer", "background writer")

    def __init__(self, database: str) -> None:
        self.database = database
        self.first: dict[int, float] = {}
        self.last: dict[int, tuple[str, float]] = {}
        self.series: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _scan(self) -> dict[int, tuple[str, float]]:
        tick = os.sysconf("SC_CLK_TCK")
        out = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_text()
                cmd = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            cpu = (int(fields[11]) + int(fields[12])) / tick
            if comm.startswith("nginx"):
                out[int(entry.name)] = ("nginx", cpu)
            elif comm.startswith("postgres") and (
                    self.database in cmd or any(k in cmd for k in self.SHARED)):
                out[int(entry.name)] = ("postgres", cpu)
            elif (" -m courtier " in cmd and self.database in cmd) or "spawn_main" in cmd:
                # the crawl command, and the workers it starts (multiprocessing "spawn")
                out[int(entry.name)] = ("worker", cpu)
        return out

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            self.last.update(self._scan())
            self.series.append((time.monotonic(), self.seconds("worker")))

    def worker_cores(self, began: float, step: float = 2.0) -> list[float]:
        """The workers' cores in use over each ``step`` seconds from ``began`` (samples)."""
        out: list[float] = []
        last_at, last_cpu = began, 0.0
        for at, cpu in self.series:
            if at - last_at >= step:
                out.append(round((cpu - last_cpu) / (at - last_at), 2))
                last_at, last_cpu = at, cpu
        return out

    def __enter__(self) -> ServerCpu:
        self.first = {pid: cpu for pid, (_, cpu) in self._scan().items()}
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def seconds(self, kind: str) -> float:
        return sum(cpu - self.first.get(pid, 0.0)
                   for pid, (k, cpu) in self.last.items() if k == kind)


def postmaster_reaped_s() -> float:
    """CPU-seconds of the PostgreSQL server's exited children (backends of every database,
    reaped by the postmaster: ``cutime + cstime`` of the process whose parent is not a
    postgres process). Their delta over a run bounds from above what this run's exited
    backends cost beyond the samples (other databases' backends count too)."""
    tick = os.sysconf("SC_CLK_TCK")
    comms: dict[int, tuple[str, int, float]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        comms[int(entry.name)] = (stat[stat.index("(") + 1:stat.rindex(")")], int(fields[1]),
                                  (int(fields[13]) + int(fields[14])) / tick)
    return sum(reaped for comm, parent, reaped in comms.values()
               if comm.startswith("postgres") and not comms.get(parent, ("",))[0].startswith(
                   "postgres"))


async def _transactions(dsn: str) -> tuple[int, int]:
    """Transactions of the run database so far (each store call is one: a round trip),
    and the rows it inserted, updated and deleted (work the machine's load does not
    inflate, unlike CPU time)."""
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        row = await conn.fetchrow(
            "SELECT xact_commit + xact_rollback, tup_inserted + tup_updated + tup_deleted"
            " FROM pg_stat_database WHERE datname = current_database()")
        return int(row[0]), int(row[1])
    finally:
        await conn.close()


async def _wal_lsn(dsn: str) -> int:
    """The server's WAL position in bytes (a throwaway server: all of it is this run's)."""
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        return int(await conn.fetchval("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"))
    finally:
        await conn.close()


Web = static_web.SiteManifest | realistic_web.RealisticManifest


def run(workers: int, a: argparse.Namespace, manifest: Web,
        seeds: Path, hosts: Path, work: Path, tree: tuple[str, str | None] = ("", None),
        databases: Databases | None = None) -> dict[str, Any]:
    """One crawl of the farm: ``workers`` processes on PostgreSQL (0: one process on
    SQLite, no database made), with the source tree ``tree`` (label, src path for
    PYTHONPATH; None: this one), on a database of ``databases`` (``--citus``: plain or
    Citus throwaway servers, every process of which is counted) or of ``--admin-dsn``'s
    server."""
    name = f"courtier_bench_{uuid.uuid4().hex[:10]}"
    sqlite = workers == 0
    if sqlite:
        databases, dsn = None, ""
    elif databases is None:
        asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
        dsn = ADMIN_DSN[0].rsplit("/", 1)[0] + f"/{name}"
    else:  # the schema made before the crawl: its CPU (Citus: distributing every
        # table) is not a page's
        dsn = asyncio.run(databases.create(name))
        if tree[1] is None:
            asyncio.run(_schema(dsn))
        else:
            subprocess.run([sys.executable, "-c", _SCHEMA_SCRIPT, dsn], check=True,
                           env={**os.environ, "PYTHONPATH": tree[1]})
    # the schema's own pages (every Citus shard's first ones): not the URLs'
    empty = None if databases is None else asyncio.run(postgres_sizes(dsn))
    backend = "" if databases is None else f" {databases.label}"
    realistic = isinstance(manifest, realistic_web.RealisticManifest)
    label = f"{workers}{tree[0]}{backend.replace(' ', '-')}"
    log = work / f"access-{label}.log"
    log.unlink(missing_ok=True)  # nginx appends: an earlier round's requests are not this run's
    env = dict(os.environ)
    if tree[1] is not None:
        env["PYTHONPATH"] = tree[1]
    shutil.rmtree(work / f"data-{label}", ignore_errors=True)
    try:
        store = ["--workers", str(workers), "--store", dsn] if workers else []
        cmd = [sys.executable, "-m", "courtier", "crawl", *store,
               "--data", str(work / f"data-{label}"), "--seeds-file", str(seeds),
               "--resolve", str(hosts), "--allow-network", "127.0.0.0/8", "--delay", "0",
               "--max-in-flight-per-ip", "0", "--concurrency", str(a.concurrency),
               "--progress", "none", "--linger", "0", "--user-agent", "courtier-bench/1.0",
               # the realistic web links *.invalid hosts and only the seeds' hosts resolve
               *(["--scope", "seeds-hosts"] if realistic else []), *a.crawl_arg]
        load_before = os.getloadavg()  # 1, 5 and 15 minutes, as `uptime`
        with LocalNginx(Path(manifest.root), work / f"nginx-{label}", manifest.port, log):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            busy_before = machine_busy_s()
            reaped_before = postmaster_reaped_s()
            servers_before = 0.0 if databases is None else databases.cpu_s()
            wal_before = None if databases is None else asyncio.run(_wal_lsn(dsn))
            began = time.monotonic()
            # the processes of this run: its database's backends, or the SQLite crawl's
            # command (its data folder)
            with ServerCpu(str(work / f"data-{label}") if sqlite else name) as servers:
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env,
                               stderr=open(work / f"crawl-{label}.log", "wb"),  # noqa: SIM115
                               timeout=a.max_seconds)
            wall = time.monotonic() - began
            servers_all = 0.0 if databases is None else databases.cpu_s() - servers_before
            wal = None if wal_before is None else asyncio.run(_wal_lsn(dsn)) - wal_before
            busy_after = machine_busy_s()
            busy = busy_after[0] - busy_before[0]
            stolen = busy_after[1] - busy_before[1]
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
        load_avg_after = os.getloadavg()
        time.sleep(1.0)  # statistics are sent at transaction ends: give them a moment
        reaped = postmaster_reaped_s() - reaped_before
        transactions, rows_written = (0, 0) if sqlite else asyncio.run(_transactions(dsn))
        if a.keep is not None and not sqlite:
            (work / f"pg-stats-{label}.txt").write_text(asyncio.run(_database_stats(dsn)))
        sizes = (sqlite_sizes(work / f"data-{label}" / "courtier.db") if sqlite
                 else asyncio.run(postgres_sizes(dsn)))
        if empty is not None:
            sizes = sizes.minus(empty)
    finally:
        if sqlite:
            pass
        elif databases is None:
            asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        else:
            asyncio.run(databases.drop(name))
    entries = access_log.read_log(log)
    # the independent observer's view of the crawl: politeness at the crawl's delay (0: one
    # request in flight per host, robots.txt first, nothing disallowed; on the realistic
    # web each host's own robots.txt answer and Crawl-delay) and pages served twice
    pol, cov = realistic_web.judge(entries, manifest, 0.0, a.tolerance)
    window = (cov.last_end or 0.0) - (cov.first_start or 0.0)
    to_90 = access_log.time_to_share(entries, 0.9) or 0.0
    first = cov.first_start or 0.0
    buckets = [0] * (int(window // 2) + 1)
    for e in entries:
        buckets[int((e.start - first) // 2)] += 1
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    pages = max(1, cov.distinct)
    return {"workers": workers, "tree": tree[0] + backend, "pages": cov.distinct,
            "existing": cov.existing, "requests": len(entries), "to_90_s": to_90,
            "crawler_cores": cpu / wall, "loadavg": (load_before, load_avg_after),
            "db_all_ms_per_page": (None if databases is None
                                   else 1000 * servers_all / max(1, cov.distinct)),
            "coverage": cov.coverage,
            "pg_xacts_per_page": None if sqlite else transactions / pages,
            "pg_rows_per_page": None if sqlite else rows_written / pages,
            "wal_bytes_per_page": None if wal is None else wal / max(1, cov.distinct),
            "pg_reaped_ms_per_page": 1000 * reaped / max(1, cov.distinct),
            "wall": wall, "pages_per_s": cov.distinct / wall,
            "window_s": window, "window_pages_per_s": cov.distinct / max(window, 1e-9),
            "per_2s": buckets, "worker_cores_per_2s": servers.worker_cores(began), "cpu_s": cpu,
            "cpu_ms_per_page": 1000 * cpu / max(1, cov.distinct),
            "machine_cores": busy / wall, "steal_cores": stolen / wall,
            "pg_ms_per_page": 1000 * servers.seconds("postgres") / max(1, cov.distinct),
            "nginx_ms_per_page": 1000 * servers.seconds("nginx") / max(1, cov.distinct),
            "other_ms_per_page": 1000 * (busy - stolen - cpu) / max(1, cov.distinct),
            "violations": pol.total, "min_gap_s": pol.min_gap,
            "violation_examples": pol.examples[:3],
            "violations_by_kind": (pol.concurrency, pol.gap,
                                                            pol.robots_order, pol.disallowed),
            "dup_fetches": cov.refetches,
            "dup_share": cov.refetches / max(1, cov.page_requests),
            "load_before": load_before[0], "load_after": load_avg_after[0],
            "store_sizes": sizes}


def add_web_arguments(ap: argparse.ArgumentParser) -> None:
    """The options that choose the web to crawl: this script's, and those a script that
    runs this one (pg_statement_profile.py) passes on with :func:`web_argv`."""
    ap.add_argument("--realistic", action="store_true",
                    help="crawl the realistic web (bench/realistic_web.py), made in the work "
                    "directory, instead of the static one")
    ap.add_argument("--web-dir", type=Path,
                    help="the realistic web in this folder: made there and kept, reused by a "
                    "later run of the same sizes and seed (implies --realistic)")
    ap.add_argument("--seed", type=int, default=1, help="the realistic web's seed")


def web_argv(a: argparse.Namespace) -> list[str]:
    """The options of :func:`add_web_arguments` in ``a`` as this script's command line."""
    return [*(["--realistic"] if a.realistic else []),
            *([] if a.web_dir is None else ["--web-dir", str(a.web_dir)]),
            "--seed", str(a.seed)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--pages", type=int, default=5, help="pages per host")
    ap.add_argument("--workers", type=int, action="append", help="worker counts (1 and 2)")
    ap.add_argument("--concurrency", type=int, default=64, help="per worker")
    ap.add_argument("--max-seconds", type=float, default=900)
    ap.add_argument("--crawl-arg", action="append", default=[],
                    help="one more argument for `courtier crawl` (repeatable)")
    ap.add_argument("--keep", type=Path, help="keep the logs and spools in this directory, "
                    "with each run database's statistics (pg-stats-K.txt; time per function "
                    "needs track_functions = 'pl' on the server)")
    ap.add_argument("--admin-dsn", default=ADMIN,
                    help="a database of the PostgreSQL server to create the runs' databases "
                    "from (default: the local server's postgres database)")
    ap.add_argument("--citus", action="store_true",
                    help="each crawl on plain PostgreSQL and on Citus (a coordinator and 2 "
                    "worker nodes), throwaway servers of this run (bench/bench_databases.py),"
                    " alternating; the CPU of every process of their servers per page")
    ap.add_argument("--plain-server", action="store_true",
                    help="each crawl on a throwaway PostgreSQL server of this run "
                    "(bench/bench_databases.py), the schema made before the crawl; the CPU "
                    "of every process of that server per page, exited backends included")
    ap.add_argument("--tree", action="append", default=[], metavar="LABEL=SRC",
                    help="also run each worker count with this source tree (PYTHONPATH=SRC), "
                    "alternating with this one: before/after in the same run (repeatable)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of all worker counts, alternating (1, 2, 1, 2, …): each "
                    "round's ratios against its own 1-worker run, then their medians")
    add_web_arguments(ap)
    ap.add_argument("--sqlite-baseline", action="store_true",
                    help="each round also crawls the web with one process on the embedded "
                    "SQLite store (before the PostgreSQL runs in even rounds, after them in "
                    "odd ones) and prints the crawler's own CPU per page of one worker on "
                    "PostgreSQL against it")
    ap.add_argument("--figures-out", type=Path, nargs="?", const=SHIPPED,
                    help="with --plain-server or --citus: write the bytes the last run's "
                    "store kept a URL, an event and an audit row (Citus's when both ran) "
                    "into this figures file for `courtier plan` (default: the one the "
                    "package ships)")
    ap.add_argument("--tolerance", type=float, default=0.01,
                    help="timing slack of the politeness judge (s)")
    a = ap.parse_args(argv)
    if a.figures_out is not None and not (a.citus or a.plain_server):
        ap.error("--figures-out: give --plain-server or --citus (the schema's own bytes "
                 "are measured before the crawl on the bench's own servers)")
    ADMIN_DSN[0] = a.admin_dsn
    counts = a.workers or [1, 2]
    for label, moved in shards_moved():
        print(f"rendezvous {label}: {moved} of 1024 shards move ({moved / 10.24:.1f} %)")
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as tmp:
        work = Path(tmp) if a.keep is None else a.keep
        work.mkdir(parents=True, exist_ok=True)
        port = free_port()
        manifest: Web
        if a.realistic or a.web_dir is not None:
            manifest = realistic_web.reuse_or_generate(a.web_dir or work / "web", a.hosts,
                                                       a.pages, port, a.seed)
            print(f"realistic web: {a.hosts} hosts x {a.pages} pages, "
                  f"{manifest.total_pages:,} resources to fetch, port {manifest.port}")
        else:
            manifest = static_web.generate(work / "web", hosts=a.hosts, pages=a.pages,
                                           port=port, page_bytes=30_000, links=50)
        seeds = static_web.write_seeds(manifest, work / "seeds.txt")
        hosts = static_web.write_hosts_file(manifest, work / "hosts.txt")
        trees: list[tuple[str, str | None]] = [
            (f"-{label}", src) for label, _, src in (t.partition("=") for t in a.tree)]
        trees.append(("", None))
        with ExitStack() as stack:
            backends: list[Databases | None] = [None]
            if a.citus:
                backends = list(stack.enter_context(plain_and_citus()))
            elif a.plain_server:
                backends = [stack.enter_context(plain_only())]
            rounds = []
            for n in range(max(1, a.repeat)):
                sqlite_first = a.sqlite_baseline and n % 2 == 1
                baseline = [run(0, a, manifest, seeds, hosts, work)] if sqlite_first else []
                results = [run(k, a, manifest, seeds, hosts, work, tree, databases)
                           for k in counts for tree in trees for databases in backends]
                if a.sqlite_baseline and not sqlite_first:
                    baseline = [run(0, a, manifest, seeds, hosts, work)]
                rounds.append(baseline + results if sqlite_first else results + baseline)
                # each round as it ends: a long invocation cut short keeps what it measured
                if a.repeat > 1:
                    print(f"round {n + 1}:")
                report(rounds[-1])
                sys.stdout.flush()
    for line in summary(rounds, counts):
        print(line)
    if a.figures_out is not None:
        runs = [r for r in rounds[-1] if r["workers"]]
        last = next((r for r in reversed(runs) if r["tree"].endswith("Citus")), runs[-1])
        write_database_store(a.figures_out, last["store_sizes"],
                             last["tree"].rpartition(" ")[2] or "PostgreSQL",
                             " ".join(sys.argv[1:] if argv is None else argv))
    return 0


def _listed(values: list[float]) -> str:
    return (f"{' '.join(f'{x:.2f}' for x in values)} (median "
            f"{statistics.median(values):.2f})")


def summary(rounds: list[list[dict[str, Any]]], counts: list[int]) -> list[str]:
    """Each round's figures set against its own runs, then their medians: K workers
    against the first count (pages/s over the whole run and over the crawl window, and
    how much sooner the server had answered 90 % of its requests), one worker's database
    CPU and round trips a page, and its crawler's CPU a page against the SQLite run of the
    same round. A round's runs are found by worker count (0: SQLite) in this tree."""
    def own(results: list[dict[str, Any]], k: int) -> dict[str, Any] | None:
        return next((r for r in results if r["workers"] == k
                     and not r["tree"].startswith("-")), None)

    out = []
    for k in counts[1:]:
        pairs = [(own(r, counts[0]), own(r, k)) for r in rounds]
        pairs_ok = [(b, r) for b, r in pairs if b is not None and r is not None]
        if len(pairs_ok) < 2:
            continue
        out.append(
            f"{k} workers / {counts[0]} over {len(pairs_ok)} rounds: whole run "
            + _listed(sorted(r["pages_per_s"] / b["pages_per_s"] for b, r in pairs_ok))
            + ", crawl window "
            + _listed(sorted(r["window_pages_per_s"] / b["window_pages_per_s"]
                             for b, r in pairs_ok))
            + ", to 90 % of the server's requests "
            + _listed(sorted(b["to_90_s"] / r["to_90_s"] for b, r in pairs_ok)))
    ones = [one for r in rounds if (one := own(r, 1)) is not None]
    dbs = [one["db_all_ms_per_page"] for one in ones if one["db_all_ms_per_page"] is not None]
    if dbs:
        out.append(f"1 worker's database CPU ms a page over {len(dbs)} rounds: "
                   + _listed(sorted(dbs)) + "; round trips a page "
                   + _listed(sorted(one["pg_xacts_per_page"] for one in ones)))
    vs_sqlite = sorted(one["cpu_ms_per_page"] / lite["cpu_ms_per_page"]
                       for r in rounds
                       if (one := own(r, 1)) is not None and (lite := own(r, 0)) is not None)
    if vs_sqlite:
        out.append(f"crawler's own CPU a page, 1 worker on PostgreSQL / 1 process on SQLite, "
                   f"same round, over {len(vs_sqlite)} rounds: " + _listed(vs_sqlite))
    return out


def report(results: list[dict[str, Any]]) -> None:
    base = next((r for r in results if r["workers"]), results[0])
    for r in results:
        lb, la = r["loadavg"]
        print(f"{'SQLite, 1 process' if not r['workers'] else str(r['workers']) + ' worker(s)'}"
              f"{r['tree']}: {r['pages']:.0f} pages (coverage "
              f"{r['coverage']:.3f} of {r['existing']}) in {r['wall']:.1f} s = "
              f"{r['pages_per_s']:.1f} pages/s, "
              f"CPU {r['cpu_ms_per_page']:.2f} ms/page (PostgreSQL {r['pg_ms_per_page']:.2f}, "
              f"nginx {r['nginx_ms_per_page']:.2f}, the whole rest of the machine "
              f"{r['other_ms_per_page']:.2f} ms/page; crawler {r['crawler_cores']:.2f} cores, "
              f"machine busy {r['machine_cores']:.2f} "
              f"cores, of which stolen by the hypervisor {r['steal_cores']:.2f}), "
              f"ratio {r['pages_per_s'] / base['pages_per_s']:.2f}; crawl window "
              f"{r['window_s']:.1f} s = {r['window_pages_per_s']:.1f} pages/s, ratio "
              f"{r['window_pages_per_s'] / base['window_pages_per_s']:.2f}; 90 % of the "
              f"server's {r['requests']} requests in {r['to_90_s']:.1f} s "
              f"(load {' '.join(f'{x:.1f}' for x in lb)} → {' '.join(f'{x:.1f}' for x in la)})")
        if r["db_all_ms_per_page"] is not None:
            ratio = ("" if base["db_all_ms_per_page"] is None else
                     f", ratio {r['db_all_ms_per_page'] / base['db_all_ms_per_page']:.2f}")
            print(f"    database servers, every process of every node (exited backends "
                  f"included): {r['db_all_ms_per_page']:.2f} ms CPU a page{ratio}")
        if r["pg_xacts_per_page"] is not None:
            wal = ("" if r["wal_bytes_per_page"] is None else
                   f"; WAL of the server the store connects to {r['wal_bytes_per_page']:.0f} B")
            print(f"    rows written a page {r['pg_rows_per_page']:.2f}{wal}")
            print(f"    PostgreSQL transactions (round trips) per page "
                  f"{r['pg_xacts_per_page']:.2f}; the server's exited backends, every "
                  f"database ({r['pg_reaped_ms_per_page']:.2f} ms/page, an upper bound of "
                  "this run's beyond the samples)")
        print(f"    {r['store_sizes'].line()}")
        c, g, o, d = r["violations_by_kind"]
        gap = "" if r["min_gap_s"] is None else f"; smallest gap on a host {r['min_gap_s']:.3f} s"
        print(f"    server's log: politeness violations {r['violations']} (concurrency {c}, "
              f"gap {g}, robots order {o}, disallowed {d}{gap}); duplicate fetches "
              f"{r['dup_fetches']} ({100 * r['dup_share']:.2f} % of page responses)")
        for example in r["violation_examples"]:
            print(f"    violation: {example}")
        print("    requests per 2 s of the window:", " ".join(map(str, r["per_2s"])))
        print("    workers' cores per 2 s of the run:",
              " ".join(f"{c:.2f}" for c in r["worker_cores_per_2s"]))


if __name__ == "__main__":
    sys.exit(main())
