"""PostgreSQL commit: the row-by-row function of migration 2 against the current one, same run.

    python bench/commit_compare.py --store postgresql://root@127.0.0.1:5432/courtier_bench

Run it on a database that ``store_bench.py`` filled (it needs due rows at the
bench's ``T0``). The old function is created next to the current one, under the
name ``courtier_commit_rowwise``, from the text of migration 0002 (with the planner
settings migration 0010 gave it) and dropped at the end. Each round leases
``--rows`` due URLs per variant (``load_due``, every shard), commits them in
batches of ``--batch`` through one function, then the other (the order alternates
between rounds), and prints results/s and the ratio. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from importlib import resources

import asyncpg

from courtier.core.outcome import Outcome
from courtier.core.urls import SHARD_COUNT
from courtier.store.base import FetchCommit
from courtier.store.postgres import PostgresStore
from courtier.store.postgres._rows import commit_rows

T0 = 1_700_000_000.0  # as in store_bench.py
PER_HOST = 64
OLD = "courtier_commit_rowwise"
SIGNATURE = "(courtier_commit[], courtier_new_url[], courtier_host_delta[], double precision)"


def old_function_sql() -> str:
    text = (resources.files("courtier.store.postgres").joinpath("migrations")
            .joinpath("0002_functions.sql").read_text("utf-8"))
    match = re.search(r"CREATE FUNCTION courtier_commit\(.*?\n\$\$;\n", text, re.S)
    if match is None:
        sys.exit("commit_compare: courtier_commit not found in migration 0002")
    return match.group(0).replace("CREATE FUNCTION courtier_commit(",
                                  f"CREATE OR REPLACE FUNCTION {OLD}(", 1)


async def leased_commits(store: PostgresStore, epochs: dict[int, int],
                         rows: int) -> list[FetchCommit]:
    due = await store.load_due(list(range(SHARD_COUNT)), T0, rows, PER_HOST)
    return [FetchCommit(d.url_key, d.url, d.host_key, d.shard, d.version,
                        epochs.get(d.shard, 0), Outcome.OK, T0, T0 + 86400, status=200)
            for d in due]


async def timed_commit(conn: asyncpg.Connection, function: str, commits: list[FetchCommit],
                       batch: int) -> tuple[float, int]:
    applied = 0
    started = time.perf_counter()
    for i in range(0, len(commits), batch):
        result = await conn.fetchval(
            f"SELECT {function}($1::courtier_commit[], $2::courtier_new_url[],"
            " $3::courtier_host_delta[], $4)", commit_rows(commits[i : i + batch]), [], [], T0)
        applied += result[0]
    return len(commits) / (time.perf_counter() - started), applied


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", required=True, help="postgresql://…/db filled by store_bench")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    store = PostgresStore(args.store)
    await store.open()
    conn = await asyncpg.connect(args.store)
    try:
        await conn.execute(old_function_sql())
        await conn.execute(f"ALTER FUNCTION {OLD}{SIGNATURE} SET plan_cache_mode ="
                           " force_custom_plan SET jit = off SET enable_hashjoin = off"
                           " SET enable_mergejoin = off")
        leases = await conn.fetch("SELECT shard, epoch FROM shards")
        epochs = {r["shard"]: r["epoch"] for r in leases}
        rates: dict[str, list[float]] = {OLD: [], "courtier_commit": []}
        for n in range(args.rounds):
            order = [OLD, "courtier_commit"] if n % 2 == 0 else ["courtier_commit", OLD]
            for function in order:
                commits = await leased_commits(store, epochs, args.rows)
                rate, applied = await timed_commit(conn, function, commits, args.batch)
                rates[function].append(rate)
                print(f"round {n + 1}  {function:24} {rate:9,.0f} results/s"
                      f"  ({applied}/{len(commits)} applied)", flush=True)
        old, new = max(rates[OLD]), max(rates["courtier_commit"])
        print(f"best of {args.rounds}: row by row {old:,.0f}/s, set-based {new:,.0f}/s,"
              f" ratio {new / old:.2f}x")
    finally:
        await conn.execute(f"DROP FUNCTION IF EXISTS {OLD}{SIGNATURE}")
        await conn.close()
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
