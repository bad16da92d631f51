"""The refill (``load_due``) of the SQLite store: hosts first, then a bounded probe per host.

Two structures from migration 0010 serve it:

* ``host_queue (shard, host_key, next_due_at, best_priority)`` — for every host
  with QUEUED rows, the earliest ``next_fetch_at`` and the best priority of
  those rows, kept exact in the same transaction as the row change:
  :func:`enter_queue` folds in rows entering QUEUED (intake, release, reset, a
  commit of a SCHEDULED row), :func:`refresh_hosts` recomputes a host after
  rows leave QUEUED or change while QUEUED (load_due, a commit of a QUEUED row);
* ``urls_queued (shard, host_key, priority, next_fetch_at, depth) WHERE state = 0``.

Ordering by "overdue first, best priority DESC, earliest" while filtering on
"due by now" cannot be one index range, but it is one range *per priority
level*: inside a level, rows (or hosts) sorted by due time are already in
contract order, the overdue ones forming a prefix. So the ready hosts are a
lazy k-way merge of one keyset-paginated index range per level (per shard and
level when only a few shards are asked for), and a host's best rows are a
merge of at most ``k`` rows from each of its levels, found by a skip scan over
its distinct priorities. Levels are few (priorities are small integers), so a
refill costs about ``levels × (hosts walked + rows returned)`` index steps,
whatever the backlog of due or known rows.
"""

from __future__ import annotations

import heapq
import json
import math
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Sequence
from itertools import islice

from courtier.dedup.fingerprint64 import from_signed64
from courtier.frontier.host import OVERDUE_AFTER
from courtier.store.base import DueUrl, UrlState

QUEUED = int(UrlState.QUEUED)
SCHEDULED = int(UrlState.SCHEDULED)

#: up to this many (shard, level) index ranges, each shard is read on its own;
#: beyond, one range per level over every shard, filtering the shards asked for
PER_SHARD_RANGES = 64
FIRST_PAGE = 64

HostKey = tuple[tuple[bool, int, float, str, int], int, str]  # rank, shard, host_key

_LEVELS = """
WITH RECURSIVE lv(p) AS (
    SELECT (SELECT best_priority FROM host_queue ORDER BY best_priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT best_priority FROM host_queue WHERE best_priority < lv.p
            ORDER BY best_priority DESC LIMIT 1) FROM lv WHERE lv.p IS NOT NULL
)
SELECT p FROM lv WHERE p IS NOT NULL
"""

_HOSTS = """
SELECT shard, host_key, next_due_at FROM host_queue INDEXED BY {index}
WHERE {shard_clause} AND best_priority = :level AND next_due_at <= :now
  AND (next_due_at, host_key, shard) > (:after_due, :after_host, :after_shard)
  {skip_clause}
ORDER BY next_due_at, host_key, shard
LIMIT :page
"""

# A host's distinct priority levels, by a skip scan of urls_queued (one step per level).
_HOST_LEVELS = """
h(i, shard, host_key) AS (SELECT key, value ->> 0, value ->> 1 FROM json_each(:hosts)),
lv(i, shard, host_key, p) AS (
    SELECT i, shard, host_key,
           (SELECT priority FROM urls WHERE shard = h.shard AND host_key = h.host_key
            AND state = 0 ORDER BY priority DESC LIMIT 1) FROM h
    UNION ALL
    SELECT i, shard, host_key,
           (SELECT priority FROM urls WHERE shard = lv.shard AND host_key = lv.host_key
            AND state = 0 AND priority < lv.p ORDER BY priority DESC LIMIT 1)
    FROM lv WHERE lv.p IS NOT NULL
)
"""

_COLUMNS = (
    "u.url_key, u.url, u.host_key, u.shard, u.depth, u.priority, u.version, u.next_fetch_at,"
    " u.redirect_hops, u.etag, u.last_modified, u.failure_count, u.payload_digest,"
    " u.change_stats, u.last_fetch_at, u.warc_file, u.simhash, u.sitemap_changefreq,"
    " u.sitemap_lastmod, u.redirect_chain"
)

_PROBE = f"""
WITH RECURSIVE {_HOST_LEVELS},
candidates AS (
    SELECT lv.i AS i, {_COLUMNS},
           ROW_NUMBER() OVER (
               PARTITION BY lv.i
               ORDER BY u.next_fetch_at < :overdue DESC, u.priority DESC, u.next_fetch_at,
                        u.depth, u.url_key
           ) AS rank
    FROM lv JOIN urls AS u ON u.url_key IN (
        SELECT url_key FROM urls
        WHERE shard = lv.shard AND host_key = lv.host_key AND state = 0
          AND priority = lv.p AND next_fetch_at <= :now
        ORDER BY next_fetch_at, depth, url_key LIMIT :k)
    WHERE lv.p IS NOT NULL
)
SELECT * FROM candidates WHERE rank <= :k ORDER BY i, rank
"""

_RECOMPUTE = f"""
WITH RECURSIVE {_HOST_LEVELS}
SELECT h.shard, h.host_key, agg.best, agg.due FROM h LEFT JOIN (
    SELECT i, MAX(p) AS best,
           MIN((SELECT next_fetch_at FROM urls WHERE shard = lv.shard
                AND host_key = lv.host_key AND state = 0 AND priority = lv.p
                AND next_fetch_at IS NOT NULL ORDER BY next_fetch_at LIMIT 1)) AS due
    FROM lv WHERE lv.p IS NOT NULL GROUP BY i
) AS agg ON agg.i = h.i
"""


def _host_ranges(
    conn: sqlite3.Connection,
    shards: Sequence[int],
    now: float,
    overdue_before: float,
    skip: str | None,
) -> list[Iterator[HostKey]]:
    """One lazy, contract-ordered stream of ready hosts per index range."""
    levels = [int(row[0]) for row in conn.execute(_LEVELS)]
    wanted = sorted(set(shards))
    skip_clause = "AND host_key NOT IN (SELECT value FROM json_each(:skip))" if skip else ""
    if len(wanted) * len(levels) <= PER_SHARD_RANGES:
        sql = _HOSTS.format(index="host_queue_shard_ready", shard_clause="shard = :shard",
                            skip_clause=skip_clause)
        return [_paged(conn, sql, level, shard, None, now, overdue_before, skip)
                for shard in wanted for level in levels]
    sql = _HOSTS.format(index="host_queue_ready",
                        shard_clause="shard IN (SELECT value FROM json_each(:shards))",
                        skip_clause=skip_clause)
    shard_list = json.dumps(wanted)
    return [_paged(conn, sql, level, None, shard_list, now, overdue_before, skip)
            for level in levels]


def _paged(
    conn: sqlite3.Connection,
    sql: str,
    level: int,
    shard: int | None,
    shard_list: str | None,
    now: float,
    overdue_before: float,
    skip: str | None,
) -> Iterator[HostKey]:
    page, after = FIRST_PAGE, (-math.inf, "", -1)
    while True:
        rows = conn.execute(sql, {
            "level": level, "shard": shard, "shards": shard_list, "now": now, "skip": skip,
            "after_due": after[0], "after_host": after[1], "after_shard": after[2],
            "page": page,
        }).fetchall()
        for row_shard, host_key, due in rows:
            yield (due >= overdue_before, -level, due, host_key, row_shard), row_shard, host_key
        if len(rows) < page:
            return
        after, page = (rows[-1][2], rows[-1][1], rows[-1][0]), 2 * page


def load_due(
    conn: sqlite3.Connection,
    shards: Sequence[int],
    now: float,
    limit: int,
    per_host_limit: int,
    skip_hosts: Collection[str],
) -> list[DueUrl]:
    """Select the contract's rows (see ``Store.load_due``) and mark them SCHEDULED."""
    if limit <= 0 or per_host_limit <= 0 or not shards:
        return []
    overdue_before = now - OVERDUE_AFTER
    skip = json.dumps(sorted(skip_hosts)) if skip_hosts else None
    hosts = heapq.merge(*_host_ranges(conn, shards, now, overdue_before, skip))
    taken: list[DueUrl] = []
    touched: list[tuple[int, str]] = []
    rows_per_host = float(per_host_limit)  # optimistic first guess, then what was seen
    while len(taken) < limit:
        remaining = limit - len(taken)
        batch = [(shard, host) for _, shard, host in
                 islice(hosts, max(1, math.ceil(remaining / rows_per_host)))]
        if not batch:
            break
        probed = _probe(conn, batch, now, overdue_before, min(per_host_limit, remaining))
        seen = 0
        for i, host in enumerate(batch):
            rows = probed.get(i, [])
            seen += len(rows)
            room = min(per_host_limit, limit - len(taken))
            if room > 0 and rows:
                taken.extend(rows[:room])
                touched.append(host)
        rows_per_host = max(1.0, seen / len(batch))
    if taken:
        conn.executemany(
            f"UPDATE urls SET state = {SCHEDULED} WHERE url_key = ? AND state = {QUEUED}",
            [(d.url_key,) for d in taken],
        )
        refresh_hosts(conn, touched)
    return taken


def _probe(
    conn: sqlite3.Connection,
    batch: list[tuple[int, str]],
    now: float,
    overdue_before: float,
    k: int,
) -> dict[int, list[DueUrl]]:
    """The best ``k`` due rows of each host of the batch, by batch position."""
    out: dict[int, list[DueUrl]] = {}
    rows = conn.execute(
        _PROBE, {"hosts": json.dumps(batch), "now": now, "overdue": overdue_before, "k": k}
    )
    for r in rows:
        out.setdefault(r[0], []).append(
            DueUrl(
                url_key=bytes(r[1]), url=r[2], host_key=r[3], shard=r[4], depth=r[5],
                priority=r[6], version=r[7], next_fetch_at=r[8], redirect_hops=r[9],
                etag=r[10], last_modified=r[11], failure_count=r[12], payload_digest=r[13],
                change_stats=r[14], last_fetch_at=r[15], warc_file=r[16],
                simhash=None if r[17] is None else from_signed64(r[17]),
                sitemap_changefreq=r[18], sitemap_lastmod=r[19], redirect_chain=r[20],
            )
        )
    return out


def refresh_hosts(conn: sqlite3.Connection, hosts: Collection[tuple[int, str]]) -> None:
    """Recompute host_queue rows of these (shard, host_key) from their QUEUED rows."""
    if not hosts:
        return
    rows = conn.execute(_RECOMPUTE, {"hosts": json.dumps(sorted(set(hosts)))}).fetchall()
    gone = [(shard, host) for shard, host, best, due in rows if best is None or due is None]
    kept = [(shard, host, due, best) for shard, host, best, due in rows
            if best is not None and due is not None]
    if gone:
        conn.executemany("DELETE FROM host_queue WHERE shard = ? AND host_key = ?", gone)
    if kept:
        conn.executemany(
            "INSERT INTO host_queue (shard, host_key, next_due_at, best_priority)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (shard, host_key) DO UPDATE"
            " SET next_due_at = excluded.next_due_at, best_priority = excluded.best_priority",
            kept,
        )


def enter_queue(conn: sqlite3.Connection, rows: Iterable[tuple[int, str, float, int]]) -> None:
    """Fold rows that entered QUEUED, as (shard, host_key, next_fetch_at, priority), into
    host_queue: one upsert per host, lowering next_due_at and raising best_priority."""
    hosts: dict[tuple[int, str], tuple[float, int]] = {}
    for shard, host_key, due, priority in rows:
        if due is None:
            continue
        seen = hosts.get((shard, host_key))
        hosts[(shard, host_key)] = (due, priority) if seen is None else (
            min(seen[0], due), max(seen[1], priority))
    if hosts:
        conn.executemany(_ENTER, [(s, h, d, p) for (s, h), (d, p) in hosts.items()])


_ENTER = (
    "INSERT INTO host_queue (shard, host_key, next_due_at, best_priority) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (shard, host_key) DO UPDATE"
    " SET next_due_at = MIN(next_due_at, excluded.next_due_at),"
    " best_priority = MAX(best_priority, excluded.best_priority)"
    " WHERE excluded.next_due_at < next_due_at OR excluded.best_priority > best_priority"
)
