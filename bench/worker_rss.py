"""Peak RSS of a `courtier worker` on a store filled by store_bench.py.

    python bench/worker_rss.py --data DIR [--seconds 40] [--hosts 100000]
    python bench/worker_rss.py --data DIR --store postgresql://…/DB

``DIR/courtier.db`` is a SQLite database left by ``store_bench.py`` (a symlink
to it will do); with ``--store``, the PostgreSQL database it left (``DIR`` then
holds only the worker's WARC files). The bench hosts all resolve to 127.0.0.1 (a hosts file passed
with ``--resolve``), the SSRF guard allows loopback only, and the worker runs
for ``--seconds``: it takes the shards, refills its frontier from the store and
tries to fetch (nothing listens on port 80 here, so fetches fail or hang; that
is fine, the frontier is full). Prints the highest VmRSS seen (sampled every
0.5 s), to compare sizes: the worker's memory should not grow with known URLs.
Bench shard leases are cleared first (the bench holds them for years).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def vm_rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


_FREE_SHARDS = "UPDATE shards SET owner = NULL"


def free_sqlite(data: Path) -> int:
    """Clear the bench's shard leases; return the known URLs."""
    db = sqlite3.connect(data / "courtier.db")
    with db:
        db.execute(_FREE_SHARDS)
        known: int = db.execute("SELECT COUNT(*) FROM urls").fetchone()[0]
    db.close()
    return known


async def free_postgres(dsn: str) -> int:
    import asyncpg  # only for --store

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(_FREE_SHARDS)
        known: int = await conn.fetchval("SELECT COUNT(*) FROM urls")
        return known
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--store", help="a postgresql:// URL (default: DIR/courtier.db)")
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--worker-arg", action="append", default=[],
                        help="one more argument for `courtier worker` (repeatable), e.g. "
                        "--worker-arg=--known-urls-cap=0")
    parser.add_argument("--log", type=Path, help="keep the worker's log in this file")
    args = parser.parse_args()
    if args.store:
        args.data.mkdir(parents=True, exist_ok=True)
        known = asyncio.run(free_postgres(args.store))
    else:
        known = free_sqlite(args.data)
    with tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False) as hosts:
        for h in range(args.hosts):
            hosts.write(f"127.0.0.1 host{h}.bench{h % 97}.example\n")
    courtier = Path(sys.executable).with_name("courtier")
    worker = subprocess.Popen(
        [str(courtier), "worker", "--data", str(args.data), "--resolve", hosts.name,
         "--allow-network", "127.0.0.0/8", "--max-seconds", str(args.seconds),
         "--progress", "none", *(["--store", args.store] if args.store else []),
         *args.worker_arg],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL if args.log is None else args.log.open("wb"))
    peak = 0
    deadline = time.monotonic() + args.seconds + 60
    while worker.poll() is None and time.monotonic() < deadline:
        peak = max(peak, vm_rss_kib(worker.pid))
        time.sleep(0.5)
    if worker.poll() is None:
        worker.kill()
    worker.wait()
    Path(hosts.name).unlink()
    print(f"known URLs {known:,}  worker peak RSS {peak / 1024:.0f} MB"
          f"  ({args.seconds:.0f} s run)")


if __name__ == "__main__":
    main()
