"""Where PostgreSQL's time goes in a crawl: a per-statement profile (issue #29).

Starts a throwaway PostgreSQL server of its own (tests/pg_server.py: the installed
server binaries, a temporary directory, a free loopback port) with
``pg_stat_statements`` loaded and tracking every statement, the ones inside the store's
PL/pgSQL functions too, then runs ``cluster_bench.py`` against it (one worker, the
static farm served by a local nginx, or with ``--realistic`` / ``--web-dir DIR`` the
realistic web, cluster_bench's own options passed on) and prints the statements that
took the most time: total, mean and max execution time, planning time, calls and rows,
time, calls and rows per crawled page (pages counted from nginx's log by
cluster_bench), and whether each was sent by the crawler (``T``, top level) or ran
inside a function.

    .venv/bin/python bench/pg_statement_profile.py --hosts 300 --pages 20
    .venv/bin/python bench/pg_statement_profile.py --hosts 1000 --pages 20 \
        --web-dir /tmp/web1000

The times are the server's own execution times (wall time inside each statement, so
a busy machine inflates them); ``cluster_bench.py``'s line above the table gives the
server's CPU per page from /proc. The throwaway server runs with ``fsync = off`` (the
test servers' default), unlike a production one: the figures are the statements'
work, not the disk's.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import asyncpg

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(BENCH))

from cluster_bench import add_web_arguments, web_argv  # noqa: E402
from tests.pg_server import throwaway_server  # noqa: E402

SETTINGS = {
    "shared_preload_libraries": "'pg_stat_statements'",
    "pg_stat_statements.track": "all",
    "pg_stat_statements.track_planning": "on",
    "track_functions": "'pl'",
    "max_connections": "100",
    "shared_buffers": "256MB",
}

TOP = (
    "SELECT calls, rows, total_exec_time, mean_exec_time, max_exec_time, total_plan_time,"
    " toplevel, query FROM pg_stat_statements"
    " WHERE query NOT LIKE '%pg_stat_statements%' AND query !~* '^(CREATE|DROP) DATABASE'"
    " ORDER BY total_exec_time DESC LIMIT $1"
)


async def _reset(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        await conn.execute("SELECT pg_stat_statements_reset()")
    finally:
        await conn.close()


async def _report(dsn: str, limit: int, pages: int) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(TOP, limit)
        total = await conn.fetchval(
            "SELECT sum(total_exec_time) FROM pg_stat_statements WHERE toplevel"
            " AND query !~* '^(CREATE|DROP) DATABASE'")
    finally:
        await conn.close()
    lines = [f"top-level statements: {float(total or 0):.1f} ms in all, "
             f"{float(total or 0) / max(1, pages) * 1000:.1f} µs a crawled page ({pages} pages)",
             f"{'total ms':>9} {'µs/page':>8} {'mean ms':>8} {'max ms':>8} {'plan ms':>8}"
             f" {'calls':>6} {'rows':>7} {'calls/pg':>8} {'rows/pg':>7}   statement"]
    for r in rows:
        text = re.sub(r"\s+", " ", r["query"]).strip()[:150]
        lines.append(
            f"{r['total_exec_time']:9.1f} {r['total_exec_time'] / max(1, pages) * 1000:8.1f}"
            f" {r['mean_exec_time']:8.2f} {r['max_exec_time']:8.1f} {r['total_plan_time']:8.1f}"
            f" {r['calls']:6d} {r['rows']:7d} {r['calls'] / max(1, pages):8.3f}"
            f" {r['rows'] / max(1, pages):7.3f} {'T' if r['toplevel'] else ' '} {text}")
    return "\n".join(lines)


def crawled_pages(bench_output: str) -> int | None:
    """The pages the crawl fetched, as cluster_bench.py printed them from nginx's log
    (the realistic web has more resources than hosts × pages: robots.txt, sitemaps,
    redirects, broken links); None if its output has no run line."""
    found = re.search(r"worker\(s\)[^:\n]*: (\d+) pages \(coverage", bench_output)
    return None if found is None else int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=300)
    ap.add_argument("--pages", type=int, default=20, help="pages per host")
    ap.add_argument("--top", type=int, default=30, help="statements to print")
    ap.add_argument("--max-seconds", type=float, default=900)
    add_web_arguments(ap)
    a = ap.parse_args(argv)
    with throwaway_server(SETTINGS, prefix="courtier-pgprofile-") as server, \
            tempfile.TemporaryDirectory(prefix="courtier-pgprofile-run-") as keep:
        asyncio.run(_reset(server.dsn()))
        done = subprocess.run(
            [sys.executable, str(BENCH / "cluster_bench.py"), "--hosts", str(a.hosts),
             "--pages", str(a.pages), "--workers", "1", "--admin-dsn", server.dsn(),
             "--keep", keep, "--max-seconds", str(a.max_seconds), *web_argv(a)],
            check=False, stdout=subprocess.PIPE, text=True)
        print(done.stdout, end="")
        if done.returncode != 0:
            print(f"cluster_bench.py exited {done.returncode}", file=sys.stderr)
            return done.returncode
        pages = crawled_pages(done.stdout) or a.hosts * a.pages
        print(asyncio.run(_report(server.dsn(), a.top, pages)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
