"""The SQLite refill's floor: the shipped ``load_due`` against the least a refill can read.

    .venv/bin/python bench/refill_floor_sqlite.py --db /tmp/sb/s.sqlite

The SQLite counterpart of ``refill_floor.py``, on a database ``bench/store_bench.py``
filled (``--store sqlite:PATH``; 100 k hosts, 1 M rows due within the hour before its
T0). Nothing is changed: the shipped refill runs in a transaction that is rolled back.
For each regime (~1 due row on each of 10 k hosts; ~10 due rows on each of 1 k
hosts) it times, alternating, ``--runs`` times:

* ``shipped``: ``_refill.load_due`` as installed (walk, marking SCHEDULED, refreshing
  ``host_levels``/``host_queue``), 10 k rows;
* ``read_due``: ``_refill.read_due``, the same selection with nothing written (the
  refill without marking, migration 0021's head columns);
* ``one probe a host``: the host queue's range, then one ``urls_queued`` range per
  host filtered on "due", each row's columns from the table — the read the issue's
  two-level design ("the best ready hosts, then a bounded probe per host") cannot go
  below; no ranking, no skip list, no writes;
* ``head key``: one primary-key lookup per row for keys given in advance — what a
  refill would read at least if each host's host-queue row carried the key of its
  best due row (a design beyond the issue's; the host range comes on top);
* ``hosts only``: the host queue's range alone.

It prints each one's median and range in ms and asserts nothing (the target: a refill
of 10 k due URLs with p99 < 100 ms at every size).
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import time
from collections.abc import Callable
from functools import partial

from refill_floor import DUE, PER_HOST, T0, WANT, print_medians

from courtier.store.sqlite import _refill

_HOSTS_ONLY = """
SELECT shard, host_key FROM host_queue INDEXED BY host_queue_ready WHERE next_due_at <= :now
ORDER BY best_priority DESC, next_due_at, host_key, shard LIMIT :hosts
"""

_ONE_PROBE = f"""
WITH h AS MATERIALIZED ({_HOSTS_ONLY})
SELECT {_refill._COLUMNS} FROM h CROSS JOIN urls AS u INDEXED BY urls_queued
ON u.shard = h.shard AND u.host_key = h.host_key AND u.state = 0 AND u.next_fetch_at <= :now
"""

_HEAD_KEY = f"""
SELECT {_refill._COLUMNS} FROM temp.heads AS k CROSS JOIN urls AS u ON u.url_key = k.url_key
ORDER BY k.i
"""


def timed(call: Callable[[], int]) -> tuple[float, int]:
    started = time.perf_counter()
    rows = call()
    return (time.perf_counter() - started) * 1000, rows


def rows_of(conn: sqlite3.Connection, sql: str, params: dict[str, float]) -> int:
    return len(conn.execute(sql, params).fetchall())


def rolled_back(select: _refill.Select, conn: sqlite3.Connection, now: float) -> int:
    """``select`` (the shipped ``load_due`` or ``read_due``) in a transaction rolled back."""
    conn.execute("BEGIN")
    try:
        return len(select(conn, list(range(1024)), now, WANT, PER_HOST, ()))
    finally:
        conn.execute("ROLLBACK")


def heads_of(conn: sqlite3.Connection, now: float, hosts: int) -> None:
    """One due key of each of the first ``hosts`` ready hosts, shuffled, in temp.heads."""
    rows = conn.execute(_ONE_PROBE, {"now": now, "hosts": hosts}).fetchall()
    first: dict[str, bytes] = {}
    for row in rows:
        first.setdefault(row[2], row[0])
    keys = list(first.values())
    random.Random(7).shuffle(keys)
    conn.execute("DELETE FROM temp.heads")
    conn.executemany("INSERT INTO temp.heads (url_key) VALUES (?)", [(k,) for k in keys])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True, help="a SQLite file filled by store_bench")
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    conn = sqlite3.connect(a.db, isolation_level=None)
    conn.execute("PRAGMA cache_size = -262144")  # 256 MiB: the floor, not the cache
    conn.execute("CREATE TEMP TABLE heads (i INTEGER PRIMARY KEY, url_key BLOB NOT NULL)")
    regimes = (("~1 due/host", T0 - 3600 + 3600 * WANT / DUE, WANT),
               ("~10 due/host", T0, WANT // 10))
    for label, now, hosts in regimes:
        heads_of(conn, now, hosts)
        params = {"now": now, "hosts": hosts}
        variants: dict[str, Callable[[], int]] = {
            "shipped": partial(rolled_back, _refill.load_due, conn, now),
            "read_due": partial(rolled_back, _refill.read_due, conn, now),
            "one probe a host": partial(rows_of, conn, _ONE_PROBE, params),
            "head key": partial(rows_of, conn, _HEAD_KEY, {}),
            "hosts only": partial(rows_of, conn, _HOSTS_ONLY, params),
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        got: dict[str, int] = {}
        for _ in range(a.runs):
            for name, call in variants.items():
                ms, got[name] = timed(call)
                times[name].append(ms)
        print_medians(label, times, got, a.runs)
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
