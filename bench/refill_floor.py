"""Where a PostgreSQL refill's time goes, and what a refill without writes would cost.

    .venv/bin/python bench/refill_floor.py --store postgresql://root@127.0.0.1:5432/DB

DB is a database that ``bench/store_bench.py`` filled (100 k hosts, 1 M rows due
within the hour before its T0; it is left in place when the bench is interrupted, or
fill one with ``store_bench.py --sizes 1000000 --runs 1``). Nothing is changed: every
call runs in a transaction that is rolled back. For each regime (~1 due row on each of
10 k hosts; ~10 due rows on each of 1 k hosts) it times, alternating, ``--runs`` times:

* ``shipped``: ``courtier_load_due`` as installed (walk, marking SCHEDULED, refreshing
  ``host_levels``/``host_queue``), 10 k rows;
* ``read_due``: ``courtier_read_due`` as installed (migration 0024): the same
  selection with nothing written, the head columns sparing the ``host_levels`` probe of
  a host with one due level;
* ``no writes``: the same function created in the transaction without its marking
  ``UPDATE`` and its level refresh (the walk and the rows it returns, nothing else);
* ``one statement``: the rows of the first 10 k (or 1 k) ready hosts in one read — the
  host queue's range, each host's due levels, each level's best rows — which is about
  the least a two-level refill reads; it does not rank overdue rows first;
* ``one probe a host``: the same without the ``host_levels`` probe — the host queue's
  range, then one ``urls_queued_rank`` range per host read in rank order and filtered
  on "due" (what a refill that kept each host's due levels in its host-queue row would
  read at least; on this data a host has ~10 queued rows, so the range is short);
* ``head key``: one primary-key probe per row for keys given in advance (one due key
  of each ready host, shuffled) — what a refill would read at least if each host's
  host-queue row carried the key of its best due row (a design beyond the issue's;
  the host range comes on top);
* ``hosts only``: the host queue's range alone.

It prints each one's median and range in ms. It asserts nothing (the target: a refill
of 10 k due URLs with p99 < 100 ms at every size).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time

import asyncpg

T0 = 1_700_000_000.0  # store_bench's
DUE = 1_000_000
WANT = 10_000
PER_HOST = 64
OVERDUE_AFTER = 7 * 24 * 3600.0
SIGNATURE = ("courtier_load_due(integer[], double precision, double precision, integer,"
             " integer, text[])")

#: the host queue's first $2 ready hosts, best first
_HOSTS_ONLY = """
SELECT q.shard, q.host_key FROM host_queue q WHERE q.next_due_at <= $1
ORDER BY q.best_priority DESC, q.next_due_at, q.host_key, q.shard LIMIT $2
"""

_ROW_COLUMNS = """u.shard, u.url_key, u.url, u.host_key, u.depth, u.priority, u.version,
         u.next_fetch_at, u.redirect_hops, u.etag, u.last_modified, u.failure_count,
         u.payload_digest, u.change_stats, u.last_fetch_at, u.warc_file, u.simhash,
         u.sitemap_changefreq, u.sitemap_lastmod, u.redirect_chain, u.value"""

_ONE_STATEMENT = f"""
WITH hosts AS ({_HOSTS_ONLY})
SELECT p.* FROM hosts h
CROSS JOIN LATERAL (SELECT l.priority FROM host_levels l
                    WHERE l.shard = h.shard AND l.host_key = h.host_key
                      AND l.next_due_at <= $1) lv
CROSS JOIN LATERAL (
  SELECT {_ROW_COLUMNS}
  FROM urls u WHERE u.shard = h.shard AND u.host_key = h.host_key AND u.state = 0
    AND u.priority = lv.priority AND u.next_fetch_at <= $1
  ORDER BY u.next_fetch_at, u.depth, u.url_key LIMIT $3) p
"""

_ONE_PROBE = f"""
WITH hosts AS ({_HOSTS_ONLY})
SELECT p.* FROM hosts h
CROSS JOIN LATERAL (
  SELECT {_ROW_COLUMNS}
  FROM urls u WHERE u.shard = h.shard AND u.host_key = h.host_key AND u.state = 0
    AND u.next_fetch_at <= $1
  ORDER BY u.priority DESC, u.next_fetch_at, u.depth, u.url_key LIMIT $3) p
"""

_HEAD_KEY = f"""
SELECT {_ROW_COLUMNS}
FROM unnest($1::integer[], $2::bytea[]) WITH ORDINALITY AS t(s, k, i)
CROSS JOIN LATERAL (SELECT * FROM urls x WHERE x.shard = t.s AND x.url_key = t.k) AS u
ORDER BY t.i
"""

_READ_SETUP = ("SET LOCAL jit = off; SET LOCAL enable_hashjoin = off;"
               " SET LOCAL enable_mergejoin = off")


def without_writes(definition: str) -> str:
    """The installed function's text, renamed, returning its rows without marking them
    and without the level refresh (a ValueError when the text is not the expected one)."""
    start = definition.index("), marked AS (")
    end = definition.index("SELECT * FROM marked m ORDER BY m.walk;")
    reader = """), marked AS (
        SELECT c.walk, u.shard, u.url_key, u.url, u.host_key, u.depth, u.priority,
               u.version, u.next_fetch_at, u.redirect_hops, u.etag, u.last_modified,
               u.failure_count, u.payload_digest, u.change_stats, u.last_fetch_at,
               u.warc_file, u.simhash, u.sitemap_changefreq, u.sitemap_lastmod,
               u.redirect_chain, u.value
        FROM found c JOIN urls u ON u.tableoid = c.toid AND u.ctid = c.tid
    )
    """
    text = definition[:start] + reader + definition[end:]
    refresh = "PERFORM courtier_levels_refresh(v_shards, v_hosts, v_prios);"
    if refresh not in text:
        raise ValueError("no level refresh in the installed courtier_load_due")
    text = text.replace(refresh, "")
    return text.replace("public.courtier_load_due(", "courtier_load_due_no_writes(", 1)


async def one_call(conn: asyncpg.Connection, setup: str | None, query: str,
                   *args: object) -> tuple[float, int]:
    tr = conn.transaction()
    await tr.start()
    try:
        if setup is not None:
            await conn.execute(setup)
        started = time.perf_counter()
        rows = await conn.fetch(query, *args)
        return (time.perf_counter() - started) * 1000, len(rows)
    finally:
        await tr.rollback()


async def heads_of(conn: asyncpg.Connection, now: float,
                   hosts: int) -> tuple[list[int], list[bytes]]:
    """One due key of each of the first ``hosts`` ready hosts, shuffled."""
    first: dict[str, tuple[int, bytes]] = {}
    for row in await conn.fetch(_ONE_PROBE, now, hosts, 1):
        first.setdefault(row["host_key"], (row["shard"], row["url_key"]))
    heads = list(first.values())
    random.Random(7).shuffle(heads)
    return [s for s, _ in heads], [k for _, k in heads]


def print_medians(label: str, times: dict[str, list[float]], got: dict[str, int],
                  runs: int) -> None:
    """One line a variant: its median and range in ms, and the rows it returned."""
    for name, values in times.items():
        median = statistics.median(values)
        per_row = f", {1000 * median / got[name]:.1f} µs a row" if got[name] else ""
        print(f"{label:>13} {name:>16}: median {median:7.1f} ms"
              f"  (min {min(values):.1f}, max {max(values):.1f}; {got[name]} rows{per_row},"
              f" {runs} runs)", flush=True)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", required=True, help="postgresql://…/DB filled by store_bench")
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    conn = await asyncpg.connect(a.store)
    try:
        definition = await conn.fetchval(
            "SELECT pg_get_functiondef($1::regprocedure)", SIGNATURE)
        no_writes = without_writes(definition)
        shards = list(range(1024))
        regimes = (("~1 due/host", T0 - 3600 + 3600 * WANT / DUE, WANT),
                   ("~10 due/host", T0, WANT // 10))
        for label, now, hosts in regimes:
            args = (shards, now, now - OVERDUE_AFTER, WANT, PER_HOST, [])
            head_shards, head_keys = await heads_of(conn, now, hosts)
            variants = {
                "shipped": (None, "SELECT * FROM courtier_load_due($1, $2, $3, $4, $5, $6)",
                            args),
                "read_due": (None, "SELECT * FROM courtier_read_due($1, $2, $3, $4, $5, $6)",
                             args),
                "no writes": (no_writes, "SELECT * FROM courtier_load_due_no_writes("
                              "$1, $2, $3, $4, $5, $6)", args),
                "one statement": (_READ_SETUP, _ONE_STATEMENT, (now, hosts, PER_HOST)),
                "one probe a host": (_READ_SETUP, _ONE_PROBE, (now, hosts, PER_HOST)),
                "head key": (_READ_SETUP, _HEAD_KEY, (head_shards, head_keys)),
                "hosts only": (_READ_SETUP, _HOSTS_ONLY, (now, hosts)),
            }
            times: dict[str, list[float]] = {name: [] for name in variants}
            got: dict[str, int] = {}
            for _ in range(a.runs):
                for name, (setup, query, call_args) in variants.items():
                    ms, n = await one_call(conn, setup, query, *call_args)
                    times[name].append(ms)
                    got[name] = n
            print_medians(label, times, got, a.runs)
    finally:
        await conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
