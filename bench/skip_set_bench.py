"""What the refill's skip set costs (issue #29): ``read_due`` with 0 to 10⁵ held hosts.

The worker's refill reads without marking (``Store.read_due``) and passes every host it
holds a row of as ``skip_hosts`` (crawl/refiller.py ``held_hosts``): its frontier's
queued hosts, fetches in flight, results waiting for their commit. The store's walk
steps over those hosts. This bench measures that cost on a fresh store (a temporary
PostgreSQL database on 127.0.0.1:5432, and a SQLite file): ``--hosts`` hosts with
``--rows`` due URLs each, then, for each skip-set size K, the same refill (``--limit``
rows, one a host) with the skip set being the K hosts the walk would return first —
the worst case, where the walk must pass every held host before it finds a free one.

    .venv/bin/python bench/skip_set_bench.py --hosts 120000 --skips 0 1000 10000 20000 100000

Each size K is measured two ways in the same run: ``start``, the walk from the beginning
(the store's remembered place forgotten first: the refill as it was before the walk
resumed, store/walk_place.py), and ``resumed``, the worker's next refill right after it,
holding those K hosts and the rows that walk returned (K + ``--limit`` hosts held), which
resumes where that walk stopped. Prints, per store, way and number of held hosts, the
median and range of the call's wall time (ms, ``--runs`` calls, alternating the sizes),
µs a returned row, the CPU the crawler's process spent in the call, and the rows
returned; and checks that no returned row is of a skipped host. With the default
``--memory-window`` of 20,000 URLs a worker holds at most ~20,000 hosts plus its fetches
in flight; 10⁵ is a worker configured with a larger window.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.pg import temporary_database  # noqa: E402

from courtier.core.clock import VirtualClock  # noqa: E402
from courtier.core.records import NewUrl  # noqa: E402
from courtier.core.urls import SHARD_COUNT, canonicalize  # noqa: E402
from courtier.store.base import Store  # noqa: E402
from courtier.store.postgres import PostgresStore  # noqa: E402
from courtier.store.sqlite import SqliteStore  # noqa: E402
from courtier.store.walk_place import WalkPlaces  # noqa: E402

T0 = 1_700_000_000.0
SHARDS = list(range(SHARD_COUNT))


async def _fill(store: Store, hosts: int, rows: int) -> None:
    batch: list[NewUrl] = []
    for h in range(hosts):
        for r in range(rows):
            c = canonicalize(f"http://h{h}.skip{h % 89}.example/p{r}.html")
            batch.append(NewUrl(c.url_key, c.url, c.host_key, c.shard, 1, 1,
                                T0 - 1 - (h * 7919 + r) % 3600, T0 - 7200))
        if len(batch) >= 5000:
            await store.add_urls(batch)
            batch = []
    if batch:
        await store.add_urls(batch)


def _walk_from_start(store: Store) -> None:
    """Forget where the store's last walk stopped (PostgresStore), so the next refill walks
    from the start: the refill as it was before migration 0031, in the same run."""
    places = getattr(store, "_walk_places", None)
    if places is not None:
        store._walk_places = WalkPlaces()  # type: ignore[attr-defined]


async def _server_pid(store: Store) -> int | None:
    """The PostgreSQL backend serving the store (its pool holds one connection), or None."""
    if not isinstance(store, PostgresStore):
        return None

    async def pid(conn: Any) -> int:
        return int(await conn.fetchval("SELECT pg_backend_pid()"))

    return await store._run("pid", pid, write=False)


def _cpu_ns(pid: int | None) -> int:
    """CPU time the process has run, ns (/proc/PID/schedstat: exact, unlike the load-bound
    wall time on a busy machine); 0 without a server process."""
    if pid is None:
        return 0
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


async def _timed(store: Store, skip: set[str], a: argparse.Namespace,
                 label: str) -> tuple[float, float, float, int]:
    pid = await _server_pid(store)
    s0, c0, w0 = _cpu_ns(pid), time.process_time(), time.perf_counter()
    due = await store.read_due(SHARDS, T0, a.limit, 1, skip_hosts=skip)
    wall, cpu = (time.perf_counter() - w0) * 1000, (time.process_time() - c0) * 1000
    server = (_cpu_ns(pid) - s0) / 1e6
    wrong = [d.host_key for d in due if d.host_key in skip]
    if wrong:
        raise SystemExit(f"{label}: a skipped host was returned: {wrong[:3]}")
    return wall, cpu, server, len(due)


async def _measure(store: Store, label: str, a: argparse.Namespace) -> None:
    started = time.perf_counter()
    await _fill(store, a.hosts, a.rows)
    print(f"{label}: {a.hosts:,} hosts x {a.rows} due rows filled in "
          f"{time.perf_counter() - started:.1f} s", flush=True)
    biggest = max(a.skips) + a.limit
    walk_order = [d.host_key for d in await store.read_due(SHARDS, T0, biggest, 1)]
    modes = ("start", "resumed")
    keys = [(m, k) for m in modes for k in a.skips]
    wall: dict[tuple[str, int], list[float]] = {key: [] for key in keys}
    cpu: dict[tuple[str, int], list[float]] = {key: [] for key in keys}
    server: dict[tuple[str, int], list[float]] = {key: [] for key in keys}
    returned: dict[tuple[str, int], int] = {}
    for _ in range(a.runs):
        for k in a.skips:
            for m in modes:
                if m == "start":  # the store remembers no earlier walk
                    _walk_from_start(store)
                    held = set(walk_order[:k])
                else:  # the worker's next refill: it holds what the first one returned too
                    held = set(walk_order[:k + a.limit])
                w, c, sv, n = await _timed(store, held, a, label)
                wall[m, k].append(w)
                cpu[m, k].append(c)
                server[m, k].append(sv)
                returned[m, k] = n
    print(f"{'store':<10} {'walk':<8} {'held hosts':>10} {'rows':>6} {'wall ms median':>15}"
          f" {'(min-max)':>17} {'us/row':>7} {'crawler CPU ms':>15} {'server CPU ms':>14}")
    for m, k in keys:
        w = wall[m, k]
        held_n = k if m == "start" else k + a.limit
        per_row = statistics.median(w) * 1000 / max(1, returned[m, k])
        print(f"{label:<10} {m:<8} {held_n:>10,} {returned[m, k]:>6}"
              f" {statistics.median(w):>15.1f} {f'({min(w):.1f}-{max(w):.1f})':>17}"
              f" {per_row:>7.1f} {statistics.median(cpu[m, k]):>15.1f}"
              f" {statistics.median(server[m, k]):>14.1f}")


async def _opened(store: Store, label: str, a: argparse.Namespace) -> None:
    await store.open()
    try:
        await _measure(store, label, a)
    finally:
        await store.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=120_000)
    ap.add_argument("--rows", type=int, default=2, help="due URLs a host")
    ap.add_argument("--skips", type=int, nargs="+", default=[0, 1000, 10_000, 20_000, 100_000])
    ap.add_argument("--limit", type=int, default=1000, help="rows a refill asks for")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--store", choices=["postgres", "sqlite", "both"], default="both")
    a = ap.parse_args(argv)
    if max(a.skips) + 3 * a.limit > a.hosts:
        ap.error("--hosts must exceed the largest skip set plus --limit")
    if a.store in ("postgres", "both"):
        with temporary_database("skipbench") as dsn:
            asyncio.run(_opened(PostgresStore(dsn, clock=VirtualClock(T0), max_size=1),
                                "postgres", a))
    if a.store in ("sqlite", "both"):
        with tempfile.TemporaryDirectory(prefix="courtier-skipbench-") as tmp:
            asyncio.run(_opened(SqliteStore(Path(tmp) / "crawl.sqlite", clock=VirtualClock(T0)),
                                "sqlite", a))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
