"""The cluster half of the SQLite store (contract: store/cluster.py; schema: migration 0011).

Several processes may share one SQLite file on one machine: every write here runs in
one ``BEGIN IMMEDIATE`` transaction, which takes the database's write lock before
reading, so a read-decide-write (an acquisition, a day-count grant, an IP slot) is
atomic across processes as well as across coroutines. Times are the caller's ``now``
(one machine: one wall clock); :meth:`store_now` is the store's clock.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import astuple, fields
from typing import Any, TypeVar

from courtier.clock import Clock
from courtier.dedup.fingerprint64 import from_signed64
from courtier.store.cluster import (
    ClusterView,
    DayGrant,
    DayReservation,
    HostClock,
    IpGrant,
    LeaseRecord,
    ScopeRule,
    TrapStats,
    WorkerRecord,
)
from courtier.store.cluster_rules import (
    acquire_step,
    check_scope_kinds,
    day_grant,
    day_window,
    ip_retry_at,
)
from courtier.store.sqlite._queries import as_json_list, reset_scheduled

T = TypeVar("T")

CLOCK_COLUMNS = tuple(f.name for f in fields(HostClock))


def fenced_shards(conn: sqlite3.Connection, epochs: Mapping[int, int]) -> set[int]:
    """The shards of ``epochs`` whose stored epoch (0 when never leased) is the given one."""
    stored = dict(conn.execute(
        "SELECT shard, epoch FROM shards WHERE shard IN (SELECT value FROM json_each(?))",
        (as_json_list(list(epochs)),)).fetchall())
    return {s for s, e in epochs.items() if stored.get(s, 0) == e}


def _acquire(conn: sqlite3.Connection, owner: str, shards: Sequence[int], now: float,
             lease: float) -> dict[int, int]:
    held: dict[int, int] = {}
    for shard in dict.fromkeys(shards):
        row = conn.execute("SELECT owner, epoch, lease_expires_at, last_owner FROM shards"
                           " WHERE shard = ?", (shard,)).fetchone()
        current, epoch, expires, last = row if row is not None else (None, 0, 0.0, None)
        step = acquire_step(owner, current, epoch, expires, last, now)
        if step is None:
            continue
        conn.execute(
            "INSERT INTO shards (shard, owner, epoch, lease_expires_at, last_owner, acquired_at)"
            " VALUES (?1, ?2, ?3, ?4, ?2, ?5) ON CONFLICT (shard) DO UPDATE SET"
            " owner = ?2, epoch = ?3, lease_expires_at = ?4, last_owner = ?2,"
            " acquired_at = CASE WHEN ?6 THEN ?5 ELSE acquired_at END",
            (shard, owner, step.epoch, now + lease, now, step.new_term))
        if step.handover is not None:
            conn.execute("UPDATE cluster_counters SET value = value + 1 WHERE name = ?",
                         (step.handover,))
        held[shard] = step.epoch
    return held


def _release(conn: sqlite3.Connection, owner: str, shards: Sequence[int],
             epochs: Mapping[int, int] | None) -> None:
    mine = []
    for shard in dict.fromkeys(shards):
        if epochs is not None and shard not in epochs:
            continue
        cur = conn.execute(
            "UPDATE shards SET owner = NULL, epoch = epoch + 1, lease_expires_at = 0,"
            " acquired_at = 0 WHERE shard = ?1 AND owner = ?2 AND (?3 IS NULL OR epoch = ?3)",
            (shard, owner, None if epochs is None else epochs[shard]))
        if cur.rowcount:
            mine.append(shard)
    reset_scheduled(conn, mine)


def _view(conn: sqlite3.Connection, shards: Collection[int] | None, now: float) -> ClusterView:
    workers = [WorkerRecord(w, weight, beat, started, json.loads(info)) for w, weight, beat,
               started, info in conn.execute("SELECT worker_id, weight, heartbeat_at,"
                                             " started_at, info FROM workers ORDER BY worker_id")]
    sql = "SELECT shard, owner, epoch, lease_expires_at, acquired_at FROM shards"
    params: tuple[Any, ...] = ()
    if shards is not None:
        sql += " WHERE shard IN (SELECT value FROM json_each(?))"
        params = (as_json_list(sorted(set(shards))),)
    leases = [LeaseRecord(*row) for row in conn.execute(sql + " ORDER BY shard", params)]
    counters = dict(conn.execute("SELECT name, value FROM cluster_counters").fetchall())
    return ClusterView(now, workers, leases, counters)


def _reserve(conn: sqlite3.Connection, asks: Sequence[DayReservation]) -> dict[str, DayGrant]:
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


def _acquire_ip(conn: sqlite3.Connection, ip: str, owner: str, cap: int, gap: float,
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


def _add_rules(conn: sqlite3.Connection, rules: Sequence[ScopeRule], now: float) -> int:
    before = conn.total_changes
    conn.executemany("INSERT OR IGNORE INTO scope_rules (kind, value, added_at) VALUES (?, ?, ?)",
                     [(r.kind, r.value, now) for r in rules])
    return conn.total_changes - before


#: one shard's most recently fetched fingerprints: one range of ``urls_recent_simhash``
#: (migration 0017), whatever the shard's size
RECENT_SIMHASHES = ("SELECT url_key, simhash FROM urls WHERE shard = ? AND simhash IS NOT NULL"
                    " ORDER BY last_fetch_at DESC, url_key LIMIT ?")


class SqliteCluster:
    """Mixed into SqliteStore (which provides ``_tx`` and ``_clock``)."""

    _clock: Clock

    async def _tx(self, op: str, fn: Callable[[sqlite3.Connection], T],
                  write: bool = True) -> T:
        raise NotImplementedError

    async def store_now(self) -> float:
        return self._clock.now()

    async def heartbeat(self, worker_id: str, weight: float, info: Mapping[str, Any],
                        now: float) -> float:
        text = json.dumps(dict(info), separators=(",", ":"))
        await self._tx("heartbeat", lambda conn: conn.execute(
            "INSERT INTO workers (worker_id, weight, heartbeat_at, started_at, info)"
            " VALUES (?1, ?2, ?3, ?3, ?4) ON CONFLICT (worker_id) DO UPDATE SET weight = ?2,"
            " heartbeat_at = ?3, info = ?4", (worker_id, weight, now, text)))
        return now

    async def leave(self, worker_id: str) -> None:
        await self._tx("leave", lambda conn: conn.execute(
            "DELETE FROM workers WHERE worker_id = ?", (worker_id,)))

    async def prune_workers(self, max_age: float, now: float) -> list[str]:
        def job(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                "DELETE FROM workers WHERE heartbeat_at < ?1 AND NOT EXISTS (SELECT 1 FROM"
                " shards s WHERE s.owner = workers.worker_id AND s.lease_expires_at > ?2)"
                " RETURNING worker_id", (now - max_age, now)).fetchall()
            return sorted(str(r[0]) for r in rows)

        return await self._tx("prune_workers", job)

    async def cluster_view(self, shards: Collection[int] | None = None) -> ClusterView:
        now = self._clock.now()
        return await self._tx("cluster_view", lambda conn: _view(conn, shards, now),
                              write=False)

    async def acquire_shards(self, owner: str, shards: Sequence[int], now: float,
                             lease_seconds: float) -> dict[int, int]:
        wanted = list(shards)
        return await self._tx("acquire_shards", lambda conn: _acquire(
            conn, owner, wanted, now, lease_seconds))

    async def renew_shards(self, owner: str, epochs: dict[int, int], now: float,
                           lease_seconds: float) -> set[int]:
        held = dict(epochs)

        def job(conn: sqlite3.Connection) -> set[int]:
            return {shard for shard, epoch in held.items() if conn.execute(
                "UPDATE shards SET lease_expires_at = ? WHERE shard = ? AND owner = ?"
                " AND epoch = ?", (now + lease_seconds, shard, owner, epoch)).rowcount}

        return await self._tx("renew_shards", job)

    async def release_shards(self, owner: str, shards: Sequence[int],
                             epochs: Mapping[int, int] | None = None) -> None:
        wanted, fence = list(shards), None if epochs is None else dict(epochs)
        await self._tx("release_shards", lambda conn: _release(conn, owner, wanted, fence))

    async def reserve_day_counts(self, reservations: Sequence[DayReservation]
                                 ) -> dict[str, DayGrant]:
        asks = list(reservations)
        if not asks:
            return {}
        return await self._tx("reserve_day_counts", lambda conn: _reserve(conn, asks))

    async def save_host_clocks(self, clocks: Sequence[HostClock]) -> None:
        now = self._clock.now()
        rows = [(*astuple(c)[:-1], now) for c in clocks]
        if not rows:
            return
        marks = ", ".join("?" * len(CLOCK_COLUMNS))
        await self._tx("save_host_clocks", lambda conn: conn.executemany(
            f"INSERT OR REPLACE INTO host_clocks ({', '.join(CLOCK_COLUMNS)}) VALUES ({marks})",
            rows))

    async def load_host_clocks(self, host_keys: Collection[str]) -> dict[str, HostClock]:
        keys = list(host_keys)

        def job(conn: sqlite3.Connection) -> dict[str, HostClock]:
            rows = conn.execute(
                f"SELECT {', '.join(CLOCK_COLUMNS)} FROM host_clocks"
                " WHERE host_key IN (SELECT value FROM json_each(?))", (json.dumps(keys),))
            return {row[0]: HostClock(*row) for row in rows}

        return await self._tx("load_host_clocks", job, write=False) if keys else {}

    async def save_trap_stats(self, stats: Sequence[TrapStats]) -> None:
        now = self._clock.now()
        rows = [(s.host_key, s.shard, bytes(s.data), now) for s in stats]
        if not rows:
            return
        await self._tx("save_trap_stats", lambda conn: conn.executemany(
            "INSERT OR REPLACE INTO trap_stats (host_key, shard, data, saved_at)"
            " VALUES (?, ?, ?, ?)", rows))

    async def load_trap_stats(self, host_keys: Collection[str]) -> dict[str, TrapStats]:
        keys = list(host_keys)

        def job(conn: sqlite3.Connection) -> dict[str, TrapStats]:
            rows = conn.execute(
                "SELECT host_key, shard, data, saved_at FROM trap_stats"
                " WHERE host_key IN (SELECT value FROM json_each(?))", (json.dumps(keys),))
            return {r[0]: TrapStats(r[0], r[1], bytes(r[2]), r[3]) for r in rows}

        return await self._tx("load_trap_stats", job, write=False) if keys else {}

    async def load_simhashes(self, shards: Collection[int], limit_per_shard: int
                             ) -> dict[int, list[tuple[bytes, int]]]:
        wanted = sorted(set(shards))

        def job(conn: sqlite3.Connection) -> dict[int, list[tuple[bytes, int]]]:
            out: dict[int, list[tuple[bytes, int]]] = {}
            for shard in wanted:
                rows = conn.execute(RECENT_SIMHASHES, (shard, limit_per_shard)).fetchall()
                if rows:
                    out[shard] = [(bytes(k), from_signed64(fp)) for k, fp in rows]
            return out

        if not wanted or limit_per_shard <= 0:
            return {}
        return await self._tx("load_simhashes", job, write=False)

    async def acquire_ip_slot(self, ip: str, owner: str, max_concurrent: int,
                              min_gap: float, ttl: float, now: float) -> IpGrant:
        return await self._tx("acquire_ip_slot", lambda conn: _acquire_ip(
            conn, ip, owner, max_concurrent, min_gap, ttl, now))

    async def release_ip_slot(self, ip: str, token: int) -> None:
        await self._tx("release_ip_slot", lambda conn: conn.execute(
            "DELETE FROM ip_slots WHERE ip = ? AND token = ?", (ip, token)))

    async def release_ip_slots_of(self, owner: str) -> int:
        return int(await self._tx("release_ip_slots_of", lambda conn: conn.execute(
            "DELETE FROM ip_slots WHERE owner = ?", (owner,)).rowcount))

    async def add_scope_rules(self, rules: Sequence[ScopeRule]) -> int:
        check_scope_kinds(rules)
        batch, now = list(rules), self._clock.now()
        return await self._tx("add_scope_rules", lambda conn: _add_rules(conn, batch, now))

    async def scope_rules(self, after: int = 0) -> list[ScopeRule]:
        def job(conn: sqlite3.Connection) -> list[ScopeRule]:
            return [ScopeRule(kind, value, rid) for rid, kind, value in conn.execute(
                "SELECT id, kind, value FROM scope_rules WHERE id > ? ORDER BY id", (after,))]

        return await self._tx("scope_rules", job, write=False)
