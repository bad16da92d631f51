"""Transaction bodies of the cluster half of the SQLite store (contract:
store/cluster.py; schema: migration 0011), module functions taking the connection, run
by :class:`~courtier.store.sqlite.store.SqliteStore` (no state here).

Several processes may share one SQLite file on one machine: every write here runs in
one ``BEGIN IMMEDIATE`` transaction, which takes the database's write lock before
reading, so a read-decide-write (an acquisition, a day-count grant, an IP slot) is
atomic across processes as well as across coroutines. Times are the caller's ``now``
(one machine: one wall clock).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from dataclasses import fields
from typing import Any

from courtier.store.cluster import (
    ClusterView,
    DayGrant,
    DayReservation,
    HostClock,
    IpGrant,
    LeaseRecord,
    ScopeRule,
    WorkerRecord,
)
from courtier.store.cluster_rules import (
    acquire_step,
    day_grant,
    day_window,
    ip_retry_at,
)
from courtier.store.sqlite._queries import as_json_list, reset_scheduled

CLOCK_COLUMNS = tuple(f.name for f in fields(HostClock))


def fenced_shards(conn: sqlite3.Connection, epochs: Mapping[int, int]) -> set[int]:
    """The shards of ``epochs`` whose stored epoch (0 when never leased) is the given one."""
    stored = dict(conn.execute(
        "SELECT shard, epoch FROM shards WHERE shard IN (SELECT value FROM json_each(?))",
        (as_json_list(list(epochs)),)).fetchall())
    return {s for s, e in epochs.items() if stored.get(s, 0) == e}


def lease_expiry(conn: sqlite3.Connection, owner: str | None) -> float:
    """When ``owner``'s worker lease, and so every shard it owns, expires (0: none)."""
    if owner is None:
        return 0.0
    row = conn.execute("SELECT expires_at FROM worker_leases WHERE owner = ?",
                       (owner,)).fetchone()
    return 0.0 if row is None else float(row[0])


def renew(conn: sqlite3.Connection, owner: str, now: float, lease: float) -> None:
    """Renew ``owner``'s worker lease: every shard it owns is held until ``now + lease``."""
    conn.execute("INSERT INTO worker_leases (owner, expires_at) VALUES (?1, ?2)"
                 " ON CONFLICT (owner) DO UPDATE SET expires_at = ?2", (owner, now + lease))


def prune(conn: sqlite3.Connection, silent_since: float, now: float) -> list[str]:
    """Forget the owners silent since before ``silent_since`` (their heartbeat; the end
    of their lease when they never beat) whose lease has ended: the lease rows first,
    then the membership rows; the ids of the workers (members) forgotten, sorted."""
    conn.execute(
        "DELETE FROM worker_leases WHERE expires_at <= ?2 AND coalesce((SELECT"
        " w.heartbeat_at FROM workers w WHERE w.worker_id = owner), expires_at) < ?1",
        (silent_since, now))
    rows = conn.execute(
        "DELETE FROM workers WHERE heartbeat_at < ?1 AND NOT EXISTS (SELECT 1 FROM"
        " worker_leases l WHERE l.owner = workers.worker_id AND l.expires_at > ?2)"
        " RETURNING worker_id", (silent_since, now)).fetchall()
    return sorted(str(r[0]) for r in rows)


def acquire(conn: sqlite3.Connection, owner: str, shards: Sequence[int], now: float,
             lease: float) -> dict[int, int]:
    """The shards of ``shards`` held by ``owner`` after its worker lease is renewed and the
    free or expired ones taken: only the rows that change owner are written."""
    held: dict[int, int] = {}
    for shard in dict.fromkeys(shards):
        row = conn.execute("SELECT owner, epoch, last_owner FROM shards WHERE shard = ?",
                           (shard,)).fetchone()
        current, epoch, last = row if row is not None else (None, 0, None)
        step = acquire_step(owner, current, epoch, lease_expiry(conn, current), last, now)
        if step is None:
            continue
        if step.new_term:
            conn.execute(
                "INSERT INTO shards (shard, owner, epoch, last_owner, acquired_at)"
                " VALUES (?1, ?2, ?3, ?2, ?4) ON CONFLICT (shard) DO UPDATE SET"
                " owner = ?2, epoch = ?3, last_owner = ?2, acquired_at = ?4",
                (shard, owner, step.epoch, now))
        if step.handover is not None:
            conn.execute("UPDATE cluster_counters SET value = value + 1 WHERE name = ?",
                         (step.handover,))
        held[shard] = step.epoch
    renew(conn, owner, now, lease)
    return held


def renew_held(conn: sqlite3.Connection, owner: str, epochs: Mapping[int, int], now: float,
               lease: float) -> set[int]:
    """Renew ``owner``'s worker lease; the shards of ``epochs`` it still owns at the epoch
    given (expired or not: nobody took them)."""
    renew(conn, owner, now, lease)
    return {shard for shard, epoch in epochs.items() if conn.execute(
        "SELECT 1 FROM shards WHERE shard = ? AND owner = ? AND epoch = ?",
        (shard, owner, epoch)).fetchone() is not None}


def release(conn: sqlite3.Connection, owner: str, shards: Sequence[int],
             epochs: Mapping[int, int] | None) -> None:
    mine = []
    for shard in dict.fromkeys(shards):
        if epochs is not None and shard not in epochs:
            continue
        cur = conn.execute(
            "UPDATE shards SET owner = NULL, epoch = epoch + 1, acquired_at = 0"
            " WHERE shard = ?1 AND owner = ?2 AND (?3 IS NULL OR epoch = ?3)",
            (shard, owner, None if epochs is None else epochs[shard]))
        if cur.rowcount:
            mine.append(shard)
    reset_scheduled(conn, mine)


def view(conn: sqlite3.Connection, shards: Collection[int] | None, now: float) -> ClusterView:
    workers = [WorkerRecord(w, weight, beat, started, json.loads(info)) for w, weight, beat,
               started, info in conn.execute("SELECT worker_id, weight, heartbeat_at,"
                                             " started_at, info FROM workers ORDER BY worker_id")]
    sql = ("SELECT s.shard, s.owner, s.epoch, coalesce(l.expires_at, 0), s.acquired_at"
           " FROM shards s LEFT JOIN worker_leases l ON l.owner = s.owner")
    params: tuple[Any, ...] = ()
    if shards is not None:
        sql += " WHERE s.shard IN (SELECT value FROM json_each(?))"
        params = (as_json_list(sorted(set(shards))),)
    leases = [LeaseRecord(*row) for row in conn.execute(sql + " ORDER BY s.shard", params)]
    counters = dict(conn.execute("SELECT name, value FROM cluster_counters").fetchall())
    return ClusterView(now, workers, leases, counters)


def reserve(conn: sqlite3.Connection, asks: Sequence[DayReservation]) -> dict[str, DayGrant]:
    grants: dict[str, DayGrant] = {}
    for ask in asks:
        row = conn.execute("SELECT day_start, used FROM day_counts WHERE budget_key = ?",
                           (ask.key,)).fetchone()
        start, used = day_window(ask, None if row is None else (float(row[0]), int(row[1])))
        granted = day_grant(ask, used)
        conn.execute("INSERT INTO day_counts (budget_key, day_start, used) VALUES (?, ?, ?)"
                     " ON CONFLICT (budget_key) DO UPDATE SET day_start = excluded.day_start,"
                     " used = excluded.used", (ask.key, start, used + granted))
        grants[ask.key] = DayGrant(ask.key, start, granted, used + granted)
    return grants


def acquire_ip(conn: sqlite3.Connection, ip: str, owner: str, cap: int, gap: float,
                ttl: float, now: float) -> IpGrant:
    conn.execute("DELETE FROM ip_slots WHERE ip = ? AND expires_at <= ?", (ip, now))
    row = conn.execute("SELECT next_allowed_at, last_token FROM ip_gaps WHERE ip = ?",
                       (ip,)).fetchone()
    next_at, token = (float("-inf"), 0) if row is None else (float(row[0]), int(row[1]))
    expiries = [e for (e,) in conn.execute("SELECT expires_at FROM ip_slots WHERE ip = ?",
                                           (ip,))]
    retry = ip_retry_at(next_at, expiries, cap, now)
    if retry is not None:
        return IpGrant(False, now, retry_at=retry)
    conn.execute("INSERT INTO ip_gaps (ip, next_allowed_at, last_token) VALUES (?, ?, ?)"
                 " ON CONFLICT (ip) DO UPDATE SET next_allowed_at = excluded.next_allowed_at,"
                 " last_token = excluded.last_token", (ip, now + gap, token + 1))
    conn.execute("INSERT INTO ip_slots (ip, token, owner, expires_at) VALUES (?, ?, ?, ?)",
                 (ip, token + 1, owner, now + ttl))
    return IpGrant(True, now, token + 1, now + ttl)


def add_rules(conn: sqlite3.Connection, rules: Sequence[ScopeRule], now: float) -> int:
    before = conn.total_changes
    conn.executemany("INSERT OR IGNORE INTO scope_rules (kind, value, added_at) VALUES (?, ?, ?)",
                     [(r.kind, r.value, now) for r in rules])
    return conn.total_changes - before


#: one shard's most recently fetched fingerprints: one range of ``urls_recent_simhash``
#: (migration 0017), whatever the shard's size
RECENT_SIMHASHES = ("SELECT url_key, simhash FROM urls WHERE shard = ? AND simhash IS NOT NULL"
                    " ORDER BY last_fetch_at DESC, url_key LIMIT ?")
