"""Intake before and after the host-queue level arrays (PostgreSQL migration 0024).

    PYTHONPATH=src .venv/bin/python bench/intake_ab.py --store postgresql://…/DB --rounds 20

DB is a database ``bench/store_bench.py`` filled. Each round inserts 5,000 new URLs
(``store_bench``'s batches: 500 rows = 10 pages x 50 links) once through migration 18's
``courtier_add_urls`` (created for the round as ``courtier_add_urls_0018``: host queue
without level arrays) and once through the installed one, in alternating order, each in a
transaction that is rolled back. It prints each one's median rate and their ratio; it
asserts nothing (the target: intake ≥ 50 k new rows/s at 1 M and 10 M).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import asyncpg
from store_bench import host_table, intake_batches

from courtier.store.postgres import _rows

MIGRATION_18 = (Path(__file__).parent.parent / "src/courtier/store/postgres/migrations"
                / "0018_intake_one_pass.sql")


def old_intake() -> str:
    text = MIGRATION_18.read_text()
    text = text[text.index("CREATE OR REPLACE FUNCTION courtier_add_urls"):]
    return text.replace("courtier_add_urls(", "courtier_add_urls_0018(")


async def one_round(conn: asyncpg.Connection, function: str, setup: str | None,
                    batches: list[list[tuple[object, ...]]]) -> float:
    tr = conn.transaction()
    await tr.start()
    try:
        if setup is not None:
            await conn.execute(setup)
        started, added = time.perf_counter(), 0
        for rows in batches:
            added += await conn.fetchval(f"SELECT {function}($1::courtier_new_url[])", rows)
        return added / (time.perf_counter() - started)
    finally:
        await tr.rollback()


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", required=True, help="postgresql://…/DB filled by store_bench")
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    conn = await asyncpg.connect(a.store)
    table, setup = host_table(100_000), old_intake()
    rates: dict[str, list[float]] = {"migration 18": [], "installed": []}
    try:
        for r in range(a.rounds):
            batches = [_rows.new_url_rows(b)
                       for b in intake_batches(table, f"ab{r}-{time.time()}", 5000)]
            order = ["migration 18", "installed"]
            for name in order if r % 2 == 0 else order[::-1]:
                old = name == "migration 18"
                rates[name].append(await one_round(
                    conn, "courtier_add_urls_0018" if old else "courtier_add_urls",
                    setup if old else None, batches))
    finally:
        await conn.close()
    for name, values in rates.items():
        print(f"{name:>12}: median {statistics.median(values):,.0f} new rows/s"
              f" (min {min(values):,.0f}, max {max(values):,.0f}; {len(values)} rounds)")
    ratio = statistics.median(rates["installed"]) / statistics.median(rates["migration 18"])
    print(f"installed / migration 18: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
