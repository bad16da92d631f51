"""The refill (``load_due``) of the SQLite store: hosts first, then a bounded probe per host.

Three structures serve it (migrations 0010 and 0011):

* ``host_queue (shard, host_key, next_due_at, best_priority, levels)`` — for
  every host with QUEUED rows, the earliest ``next_fetch_at`` and the best
  priority of those rows, and (migration 0021) its host_levels rows as a JSON
  array of ``[priority, next_due_at]``, best level first;
* ``host_levels (shard, host_key, priority, next_due_at)`` — the same split by
  priority level: the earliest ``next_fetch_at`` of the host's QUEUED rows of
  that priority;
* ``urls_queued (shard, host_key, priority, next_fetch_at, depth) WHERE state = 0``.

Both tables are kept exact in the same transaction as the row change:
:func:`enter_queue` folds in rows entering QUEUED (intake, release, reset,
commits), :func:`refresh_levels` / :func:`refresh_hosts` recompute the levels
rows left or changed in (one index seek per level), then the host from its levels.

Ordering by "overdue first, best priority DESC, earliest" while filtering on
"due by now" cannot be one index range, but it is one range *per priority
level*: inside a level, rows (or hosts) sorted by due time are already in
contract order, the overdue ones forming a prefix. So the ready hosts are a
lazy k-way merge of one keyset-paginated index range per level of host_queue
(per shard and level when only a few shards are asked for), and a host's best
rows come from one ``urls_queued`` range of at most ``k`` rows per level that
has a due row, sorted in Python; the host range reads each host's levels from
the index it walks, so no host_levels row is read. A refill costs about
``levels + hosts walked + due levels probed + rows returned`` index steps,
whatever the backlog of due or known rows.
"""

from __future__ import annotations

import heapq
import json
import math
import sqlite3
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from itertools import islice

from courtier.dedup.fingerprint64 import from_signed64
from courtier.store.base import OVERDUE_AFTER, DueUrl, UrlState

QUEUED = int(UrlState.QUEUED)
SCHEDULED = int(UrlState.SCHEDULED)

#: up to this many (shard, level) index ranges, each shard is read on its own;
#: beyond, one range per level over every shard, filtering the shards asked for
PER_SHARD_RANGES = 64
FIRST_PAGE = 64

#: a refill's selection: (conn, shards, now, limit, per_host_limit, skip_hosts) → rows
Select = Callable[[sqlite3.Connection, Sequence[int], float, int, int, Collection[str]],
                  list[DueUrl]]

#: rank, shard, host_key, levels (JSON)
HostKey = tuple[tuple[bool, int, float, str, int], int, str, str]

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
SELECT shard, host_key, next_due_at, levels FROM host_queue INDEXED BY {index}
WHERE {shard_clause} AND best_priority = :level AND next_due_at <= :now
  AND (next_due_at, host_key, shard) > (:after_due, :after_host, :after_shard)
  {skip_clause}
ORDER BY next_due_at, host_key, shard
LIMIT :page
"""

_COLUMNS = (
    "u.url_key, u.url, u.host_key, u.shard, u.depth, u.priority, u.version, u.next_fetch_at,"
    " u.redirect_hops, u.etag, u.last_modified, u.failure_count, u.payload_digest,"
    " u.change_stats, u.last_fetch_at, u.warc_file, u.simhash, u.sitemap_changefreq,"
    " u.sitemap_lastmod, u.redirect_chain, u.value"
)

# The best k due rows of each host given as [shard, host_key, levels]: one urls_queued
# range per level whose due time has come (the host-queue row's levels, read in SQL).
_PROBE = f"""
WITH h(i, shard, host_key, levels) AS (
    SELECT key, value ->> 0, value ->> 1, value ->> 2 FROM json_each(:hosts)),
lv(i, shard, host_key, p) AS (
    SELECT h.i, h.shard, h.host_key, l.value ->> 0 FROM h, json_each(h.levels) AS l
    WHERE l.value ->> 1 <= :now)
SELECT lv.i, {_COLUMNS}
FROM lv JOIN urls AS u ON u.url_key IN (
    SELECT url_key FROM urls INDEXED BY urls_queued
    WHERE shard = lv.shard AND host_key = lv.host_key AND state = 0
      AND priority = lv.p AND next_fetch_at <= :now
    ORDER BY next_fetch_at, depth, url_key LIMIT :k)
"""

# The earliest QUEUED row of each (host, level): one seek each; NULL empties the level.
_LEVEL_DUE = """
WITH t(shard, host_key, p) AS (
    SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(:levels))
SELECT t.shard, t.host_key, t.p,
       (SELECT next_fetch_at FROM urls INDEXED BY urls_queued
        WHERE shard = t.shard AND host_key = t.host_key AND state = 0 AND priority = t.p
          AND next_fetch_at IS NOT NULL ORDER BY next_fetch_at LIMIT 1)
FROM t
"""

# host_queue from host_levels: every level of each host (NULLs: it has none left).
_HOST_FROM_LEVELS = """
WITH h(shard, host_key) AS (SELECT value ->> 0, value ->> 1 FROM json_each(:hosts))
SELECT h.shard, h.host_key, l.priority, l.next_due_at
FROM h LEFT JOIN host_levels AS l ON l.shard = h.shard AND l.host_key = h.host_key
"""

# Every level a host has (the levels a commit or requeue may have changed).
_HOST_LEVEL_KEYS = """
SELECT l.shard, l.host_key, l.priority FROM json_each(:hosts) AS h
JOIN host_levels AS l ON l.shard = h.value ->> 0 AND l.host_key = h.value ->> 1
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
        for row_shard, host_key, due, levels in rows:
            yield ((due >= overdue_before, -level, due, host_key, row_shard), row_shard, host_key,
                   levels)
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
    taken = read_due(conn, shards, now, limit, per_host_limit, skip_hosts)
    if taken:
        conn.executemany(
            f"UPDATE urls SET state = {SCHEDULED} WHERE url_key = ? AND state = {QUEUED}",
            [(d.url_key,) for d in taken],
        )
        refresh_levels(conn, {(d.shard, d.host_key, d.priority) for d in taken})
    return taken


def read_due(
    conn: sqlite3.Connection,
    shards: Sequence[int],
    now: float,
    limit: int,
    per_host_limit: int,
    skip_hosts: Collection[str],
) -> list[DueUrl]:
    """The contract's rows (see ``Store.load_due``) in walk order; nothing is written."""
    if limit <= 0 or per_host_limit <= 0 or not shards:
        return []
    overdue_before = now - OVERDUE_AFTER
    skip = json.dumps(sorted(skip_hosts)) if skip_hosts else None
    hosts = heapq.merge(*_host_ranges(conn, shards, now, overdue_before, skip))
    taken: list[DueUrl] = []
    rows_per_host = float(per_host_limit)  # optimistic first guess, then what was seen
    while len(taken) < limit:
        remaining = limit - len(taken)
        batch = [(shard, host, levels) for _, shard, host, levels
                 in islice(hosts, max(1, math.ceil(remaining / rows_per_host)))]
        if not batch:
            break
        probed = _probe(conn, batch, now, overdue_before, min(per_host_limit, remaining))
        seen = 0
        for i in range(len(batch)):
            rows = probed.get(i, [])
            seen += len(rows)
            room = min(per_host_limit, limit - len(taken))
            if room > 0:
                taken.extend(rows[:room])
        rows_per_host = max(1.0, seen / len(batch))
    return taken


def _row_rank(d: DueUrl, overdue_before: float) -> tuple[bool, int, float, int, bytes]:
    return d.next_fetch_at >= overdue_before, -d.priority, d.next_fetch_at, d.depth, d.url_key


def _probe(
    conn: sqlite3.Connection,
    batch: list[tuple[int, str, str]],
    now: float,
    overdue_before: float,
    k: int,
) -> dict[int, list[DueUrl]]:
    """The best ``k`` due rows of each host of the batch, in rank order, by batch position.

    Each due level gives its first ``k`` rows in (next_fetch_at, depth, url_key)
    order, which inside one level is the contract's row order (the overdue rows
    are a prefix); the host's best ``k`` are among them, so sorting those suffices.
    """
    found: dict[int, list[DueUrl]] = {}
    rows = conn.execute(_PROBE, {"hosts": json.dumps(batch), "now": now, "k": k})
    for r in rows:
        found.setdefault(r[0], []).append(
            DueUrl(
                url_key=bytes(r[1]), url=r[2], host_key=r[3], shard=r[4], depth=r[5],
                priority=r[6], version=r[7], next_fetch_at=r[8], redirect_hops=r[9],
                etag=r[10], last_modified=r[11], failure_count=r[12], payload_digest=r[13],
                change_stats=r[14], last_fetch_at=r[15], warc_file=r[16],
                simhash=None if r[17] is None else from_signed64(r[17]),
                sitemap_changefreq=r[18], sitemap_lastmod=r[19], redirect_chain=r[20],
                value=r[21],
            )
        )
    for due in found.values():
        if len(due) > 1:
            due.sort(key=lambda d: _row_rank(d, overdue_before))
            del due[k:]
    return found


def refresh_hosts(conn: sqlite3.Connection, hosts: Collection[tuple[int, str]]) -> None:
    """Recompute the host_levels and host_queue rows of these (shard, host_key) after
    rows left QUEUED or changed while QUEUED (rows that entered QUEUED went through
    :func:`enter_queue` first)."""
    if not hosts:
        return
    levels = conn.execute(_HOST_LEVEL_KEYS, {"hosts": json.dumps(sorted(set(hosts)))})
    refresh_levels(conn, {(int(s), str(h), int(p)) for s, h, p in levels}, hosts)


def refresh_levels(
    conn: sqlite3.Connection,
    levels: Collection[tuple[int, str, int]],
    hosts: Collection[tuple[int, str]] = (),
) -> None:
    """Recompute these (shard, host_key, priority) levels from urls_queued, then the
    host_queue rows of their hosts (and of ``hosts``) from host_levels."""
    if levels:
        rows = conn.execute(_LEVEL_DUE, {"levels": json.dumps(sorted(levels))}).fetchall()
        gone = [(s, h, p) for s, h, p, due in rows if due is None]
        kept = [(s, h, p, due) for s, h, p, due in rows if due is not None]
        if gone:
            conn.executemany(
                "DELETE FROM host_levels WHERE shard = ? AND host_key = ? AND priority = ?", gone)
        if kept:
            conn.executemany(
                "UPDATE host_levels SET next_due_at = ?4"
                " WHERE shard = ?1 AND host_key = ?2 AND priority = ?3", kept)
    touched = sorted({(s, h) for s, h, _ in levels} | set(hosts))
    if not touched:
        return
    found: dict[tuple[int, str], dict[int, float]] = {}
    for s, h, priority, due in conn.execute(_HOST_FROM_LEVELS, {"hosts": json.dumps(touched)}):
        levels_of = found.setdefault((int(s), str(h)), {})
        if priority is not None:
            levels_of[int(priority)] = due
    gone_hosts = [host for host, levels_of in found.items() if not levels_of]
    kept_hosts = [(*host, *host_figures(levels_of)) for host, levels_of in found.items()
                  if levels_of]
    if gone_hosts:
        conn.executemany("DELETE FROM host_queue WHERE shard = ? AND host_key = ?", gone_hosts)
    if kept_hosts:
        conn.executemany(_SET_HOST, kept_hosts)


def host_figures(levels: dict[int, float]) -> tuple[float, int, str]:
    """A host's queue row from its levels (priority → earliest due time):
    ``(next_due_at, best_priority, levels)``, the levels as JSON, best first."""
    ordered = sorted(levels.items(), reverse=True)
    return min(levels.values()), ordered[0][0], json.dumps(ordered)


_SET_HOST = (
    "INSERT INTO host_queue (shard, host_key, next_due_at, best_priority, levels)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (shard, host_key) DO UPDATE"
    " SET next_due_at = excluded.next_due_at, best_priority = excluded.best_priority,"
    " levels = excluded.levels"
    " WHERE next_due_at <> excluded.next_due_at OR best_priority <> excluded.best_priority"
    " OR levels <> excluded.levels"
)


def enter_queue(conn: sqlite3.Connection, rows: Iterable[tuple[int, str, float, int]]) -> None:
    """Fold rows that entered QUEUED, as (shard, host_key, next_fetch_at, priority), into
    host_levels and host_queue: one upsert per level; each host's row is read, its levels
    merged with the arriving ones (a new level, or an earlier due time) and written back
    only when they changed."""
    levels: dict[tuple[int, str, int], float] = {}
    for shard, host_key, due, priority in rows:
        if due is None:
            continue
        key = (shard, host_key, priority)
        seen = levels.get(key)
        levels[key] = due if seen is None or due < seen else seen
    if not levels:
        return
    hosts: dict[tuple[int, str], dict[int, float]] = {}
    for (shard, host_key, priority), due in levels.items():
        hosts.setdefault((shard, host_key), {})[priority] = due
    changed: list[tuple[int, str, float, int, str]] = []
    stored = conn.execute(_HOST_LEVELS_NOW, {"hosts": json.dumps(sorted(hosts))}).fetchall()
    for shard, host_key, known in stored:  # merge with the levels the row holds
        arriving = hosts[(int(shard), str(host_key))]
        merged = {int(p): float(d) for p, d in json.loads(known)}
        before = dict(merged)
        for priority, due in arriving.items():
            if priority not in merged or due < merged[priority]:
                merged[priority] = due
        if merged != before:
            changed.append((int(shard), str(host_key), *host_figures(merged)))
        del hosts[(int(shard), str(host_key))]
    changed.extend((s, h, *host_figures(of)) for (s, h), of in hosts.items())  # new rows
    conn.executemany(_ENTER_LEVEL, [(s, h, p, d) for (s, h, p), d in sorted(levels.items())])
    conn.executemany(_SET_HOST, sorted(changed))


_ENTER_LEVEL = (
    "INSERT INTO host_levels (shard, host_key, priority, next_due_at) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (shard, host_key, priority) DO UPDATE"
    " SET next_due_at = excluded.next_due_at WHERE excluded.next_due_at < next_due_at"
)

# The stored levels of these hosts (the ones with a queue row).
_HOST_LEVELS_NOW = """
SELECT q.shard, q.host_key, q.levels FROM json_each(:hosts) AS h
JOIN host_queue AS q ON q.shard = h.value ->> 0 AND q.host_key = h.value ->> 1
"""
