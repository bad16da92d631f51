"""The cluster half of the PostgreSQL store (contract: store/cluster.py; schema and
functions: migration 0007).

Every lease, heartbeat and IP-slot time is the server's ``clock_timestamp()``
(``courtier_now()``): the ``now`` arguments of the protocol are ignored here, so
workers with skewed clocks still agree on who owns what. Decisions that read then
write (an acquisition, a day-count grant, an IP slot) lock their rows first, in a
fixed order, inside one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import astuple, fields, replace
from typing import Any, TypeVar

from courtier.dedup.fingerprint64 import from_signed64
from courtier.errors import StoreError
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
from courtier.store.cluster_rules import check_scope_kinds
from courtier.store.postgres._queries import reset_scheduled
from courtier.store.postgres._rows import Conn, host_shard

T = TypeVar("T")

CLOCK_COLUMNS = tuple(f.name for f in fields(HostClock))

#: one statement, one snapshot: store now, workers, leases and counters
VIEW_SQL = """
SELECT courtier_now() AS now,
  (SELECT coalesce(jsonb_agg(jsonb_build_array(worker_id, weight, heartbeat_at, started_at,
                                               info) ORDER BY worker_id), '[]')
     FROM workers) AS workers,
  (SELECT coalesce(jsonb_agg(jsonb_build_array(shard, owner, epoch, lease_expires_at,
                                               acquired_at) ORDER BY shard), '[]')
     FROM shards WHERE $1::integer[] IS NULL OR shard = ANY($1::integer[])) AS leases,
  (SELECT jsonb_object_agg(name, value) FROM cluster_counters) AS counters
"""


async def fenced_shards(conn: Conn, epochs: Mapping[int, int]) -> set[int]:
    """The shards of ``epochs`` whose stored epoch (0 if never leased) is the given one,
    their rows locked ``FOR SHARE`` until the transaction ends: a takeover (which
    locks them FOR UPDATE) waits, so the check holds for the rest of the transaction."""
    items = sorted(epochs.items())
    rows = await conn.fetch(
        "SELECT shard, epoch FROM shards WHERE shard = ANY($1::integer[])"
        " ORDER BY shard FOR SHARE", [s for s, _ in items])
    stored = {int(r["shard"]): int(r["epoch"]) for r in rows}
    return {s for s, e in items if stored.get(s, 0) == e}


async def lock_in_order(conn: Conn, shards: Sequence[int]) -> None:
    """Lock lease rows in shard order, as acquisitions do, so that a renewal or a release
    racing an acquisition of the same shards waits instead of deadlocking."""
    await conn.execute("SELECT 1 FROM shards WHERE shard = ANY($1::integer[])"
                       " ORDER BY shard FOR UPDATE", sorted(shards))


#: each shard's ``$2`` most recently fetched fingerprints: one range of
#: ``urls_recent_simhash`` a shard (migration 0019), whatever the shard's size
RECENT_SIMHASHES = (
    "SELECT s.shard, u.url_key, u.simhash FROM unnest($1::integer[]) AS s(shard)"
    " CROSS JOIN LATERAL (SELECT url_key, simhash, last_fetch_at FROM urls"
    "   WHERE urls.shard = s.shard AND simhash IS NOT NULL"
    "   ORDER BY last_fetch_at DESC NULLS LAST, url_key LIMIT $2) AS u"
    " ORDER BY s.shard, u.last_fetch_at DESC NULLS LAST, u.url_key")


class PostgresCluster:
    """Mixed into PostgresStore (which provides ``_run``)."""

    async def _run(self, op: str, fn: Callable[[Conn], Awaitable[T]],
                   write: bool = True) -> T:
        raise NotImplementedError

    async def store_now(self) -> float:
        async def job(conn: Conn) -> float:
            return float(await conn.fetchval("SELECT courtier_now()"))

        return await self._run("store_now", job, write=False)

    async def heartbeat(self, worker_id: str, weight: float, info: Mapping[str, Any],
                        now: float) -> float:
        text = json.dumps(dict(info), separators=(",", ":"))

        async def job(conn: Conn) -> float:
            return float(await conn.fetchval(
                "INSERT INTO workers AS w (worker_id, weight, heartbeat_at, started_at, info)"
                " SELECT $1, $2, t.now, t.now, $3::jsonb FROM (SELECT courtier_now() AS now) t"
                " ON CONFLICT (worker_id) DO UPDATE SET weight = EXCLUDED.weight,"
                " heartbeat_at = EXCLUDED.heartbeat_at, info = EXCLUDED.info"
                " RETURNING heartbeat_at", worker_id, weight, text))

        return await self._run("heartbeat", job)

    async def leave(self, worker_id: str) -> None:
        async def job(conn: Conn) -> None:
            await conn.execute("DELETE FROM workers WHERE worker_id = $1", worker_id)

        await self._run("leave", job)

    async def prune_workers(self, max_age: float, now: float) -> list[str]:
        async def job(conn: Conn) -> list[str]:
            rows = await conn.fetch(
                "DELETE FROM workers w WHERE w.heartbeat_at < courtier_now() - $1"
                " AND NOT EXISTS (SELECT 1 FROM shards s WHERE s.owner = w.worker_id"
                " AND s.lease_expires_at > courtier_now()) RETURNING w.worker_id",
                float(max_age))
            return sorted(str(r["worker_id"]) for r in rows)

        return await self._run("prune_workers", job)

    async def cluster_view(self, shards: Collection[int] | None = None) -> ClusterView:
        wanted = None if shards is None else sorted(set(shards))

        async def job(conn: Conn) -> ClusterView:
            row = _one(await conn.fetchrow(VIEW_SQL, wanted))
            workers = [WorkerRecord(w, float(weight), float(beat), float(start), info)
                       for w, weight, beat, start, info in json.loads(row["workers"])]
            leases = [LeaseRecord(int(s), o, int(e), float(x), float(a))
                      for s, o, e, x, a in json.loads(row["leases"])]
            counters = {k: int(v) for k, v in json.loads(row["counters"] or "{}").items()}
            return ClusterView(float(row["now"]), workers, leases, counters)

        return await self._run("cluster_view", job, write=False)

    async def acquire_shards(self, owner: str, shards: Sequence[int], now: float,
                             lease_seconds: float) -> dict[int, int]:
        wanted = sorted(set(shards))
        if not wanted:
            return {}

        async def job(conn: Conn) -> dict[int, int]:
            rows = await conn.fetch("SELECT * FROM courtier_acquire_shards($1, $2, $3)",
                                    owner, wanted, float(lease_seconds))
            return {int(r["shard"]): int(r["epoch"]) for r in rows}

        return await self._run("acquire_shards", job)

    async def renew_shards(self, owner: str, epochs: dict[int, int], now: float,
                           lease_seconds: float) -> set[int]:
        items = sorted(epochs.items())
        if not items:
            return set()

        async def job(conn: Conn) -> set[int]:
            await lock_in_order(conn, [s for s, _ in items])
            rows = await conn.fetch(
                "UPDATE shards s SET lease_expires_at = courtier_now() + $3"
                " FROM unnest($1::integer[], $2::bigint[]) AS t(shard, epoch)"
                " WHERE s.shard = t.shard AND s.epoch = t.epoch AND s.owner = $4"
                " RETURNING s.shard", [s for s, _ in items], [e for _, e in items],
                float(lease_seconds), owner)
            return {int(r["shard"]) for r in rows}

        return await self._run("renew_shards", job)

    async def release_shards(self, owner: str, shards: Sequence[int],
                             epochs: Mapping[int, int] | None = None) -> None:
        wanted = sorted(set(shards) if epochs is None else set(shards) & set(epochs))
        fence = [0 if epochs is None else epochs[s] for s in wanted]

        async def job(conn: Conn) -> None:
            await lock_in_order(conn, wanted)
            rows = await conn.fetch(
                "UPDATE shards s SET owner = NULL, epoch = s.epoch + 1, lease_expires_at = 0,"
                " acquired_at = 0 FROM unnest($1::integer[], $2::bigint[]) AS t(shard, epoch)"
                " WHERE s.shard = t.shard AND s.owner = $3 AND ($4 OR s.epoch = t.epoch)"
                " RETURNING s.shard", wanted, fence, owner, epochs is None)
            await reset_scheduled(conn, [int(r["shard"]) for r in rows])

        if wanted:
            await self._run("release_shards", job)

    async def reserve_day_counts(self, reservations: Sequence[DayReservation]
                                 ) -> dict[str, DayGrant]:
        asks = sorted(reservations, key=lambda a: a.key)  # stable: one key keeps its order
        if not asks:
            return {}

        async def job(conn: Conn) -> dict[str, DayGrant]:
            rows = await conn.fetch(
                "SELECT * FROM courtier_reserve_day_counts($1, $2, $3, $4)",
                [a.key for a in asks], [float(a.day_start) for a in asks],
                [a.n for a in asks], [a.limit for a in asks])
            return {r["budget_key"]: DayGrant(r["budget_key"], float(r["day_start"]),
                                              int(r["granted"]), int(r["used"])) for r in rows}

        return await self._run("reserve_day_counts", job)

    async def save_host_clocks(self, clocks: Sequence[HostClock]) -> None:
        # one row per host (the last given), keyed by the shard its key names
        latest = {c.host_key: replace(c, shard=host_shard(c.host_key)) for c in clocks}
        rows = [astuple(latest[k])[:-1] for k in sorted(latest)]
        if not rows:
            return
        names = CLOCK_COLUMNS[:-1]
        columns = ", ".join((*names, "saved_at"))
        casts = ", ".join(f"${i + 1}::{_pg_type(n)}[]" for i, n in enumerate(names))
        updates = ", ".join(f"{n} = EXCLUDED.{n}" for n in (*names, "saved_at")
                            if n != "host_key")

        async def job(conn: Conn) -> None:
            await conn.execute(
                f"INSERT INTO host_clocks ({columns}) SELECT *, courtier_now()"
                f" FROM unnest({casts}) ON CONFLICT (shard, host_key) DO UPDATE SET {updates}",
                *[list(col) for col in zip(*rows, strict=True)])

        await self._run("save_host_clocks", job)

    async def load_host_clocks(self, host_keys: Collection[str]) -> dict[str, HostClock]:
        keys = sorted(set(host_keys))
        if not keys:
            return {}

        async def job(conn: Conn) -> dict[str, HostClock]:
            rows = await conn.fetch(
                f"SELECT {', '.join(CLOCK_COLUMNS)} FROM host_clocks"
                " WHERE (shard, host_key) IN (SELECT * FROM unnest($1::integer[], $2::text[]))",
                [host_shard(k) for k in keys], keys)
            return {r["host_key"]: HostClock(*r) for r in rows}

        return await self._run("load_host_clocks", job, write=False)

    async def save_trap_stats(self, stats: Sequence[TrapStats]) -> None:
        latest = {s.host_key: s for s in stats}  # one row per host: the last given
        keys = sorted(latest)
        if not keys:
            return

        async def job(conn: Conn) -> None:
            await conn.execute(
                "INSERT INTO trap_stats (shard, host_key, data, saved_at)"
                " SELECT s, h, d, courtier_now()"
                " FROM unnest($1::integer[], $2::text[], $3::bytea[]) AS t(s, h, d)"
                " ON CONFLICT (shard, host_key) DO UPDATE"
                " SET data = EXCLUDED.data, saved_at = EXCLUDED.saved_at",
                [host_shard(k) for k in keys], keys, [bytes(latest[k].data) for k in keys])

        await self._run("save_trap_stats", job)

    async def load_trap_stats(self, host_keys: Collection[str]) -> dict[str, TrapStats]:
        keys = sorted(set(host_keys))
        if not keys:
            return {}

        async def job(conn: Conn) -> dict[str, TrapStats]:
            rows = await conn.fetch(
                "SELECT host_key, shard, data, saved_at FROM trap_stats"
                " WHERE (shard, host_key) IN (SELECT * FROM unnest($1::integer[], $2::text[]))",
                [host_shard(k) for k in keys], keys)
            return {r["host_key"]: TrapStats(r["host_key"], int(r["shard"]), bytes(r["data"]),
                                             float(r["saved_at"])) for r in rows}

        return await self._run("load_trap_stats", job, write=False)

    async def load_simhashes(self, shards: Collection[int], limit_per_shard: int
                             ) -> dict[int, list[tuple[bytes, int]]]:
        wanted = sorted(set(shards))
        if not wanted or limit_per_shard <= 0:
            return {}

        async def job(conn: Conn) -> dict[int, list[tuple[bytes, int]]]:
            rows = await conn.fetch(RECENT_SIMHASHES, wanted, limit_per_shard)
            out: dict[int, list[tuple[bytes, int]]] = {}
            for r in rows:
                out.setdefault(int(r["shard"]), []).append(
                    (bytes(r["url_key"]), from_signed64(int(r["simhash"]))))
            return out

        return await self._run("load_simhashes", job, write=False)

    async def acquire_ip_slot(self, ip: str, owner: str, max_concurrent: int,
                              min_gap: float, ttl: float, now: float) -> IpGrant:
        async def job(conn: Conn) -> IpGrant:
            r = _one(await conn.fetchrow(
                "SELECT * FROM courtier_acquire_ip_slot($1, $2, $3, $4, $5)",
                ip, owner, max_concurrent, float(min_gap), float(ttl)))
            return IpGrant(bool(r["granted"]), float(r["now"]), int(r["token"]),
                           float(r["expires_at"]), float(r["retry_at"]))

        return await self._run("acquire_ip_slot", job)

    async def release_ip_slot(self, ip: str, token: int) -> None:
        async def job(conn: Conn) -> None:
            await conn.execute("DELETE FROM ip_slots WHERE ip = $1 AND token = $2", ip, token)

        await self._run("release_ip_slot", job)

    async def release_ip_slots_of(self, owner: str) -> int:
        async def job(conn: Conn) -> int:
            status = await conn.execute("DELETE FROM ip_slots WHERE owner = $1", owner)
            return int(status.split()[-1])

        return await self._run("release_ip_slots_of", job)

    async def add_scope_rules(self, rules: Sequence[ScopeRule]) -> int:
        check_scope_kinds(rules)
        batch = list(dict.fromkeys((r.kind, r.value) for r in rules))
        if not batch:
            return 0

        async def job(conn: Conn) -> int:
            rows = await conn.fetch(
                "INSERT INTO scope_rules (kind, value, added_at)"
                " SELECT k, v, courtier_now() FROM unnest($1::text[], $2::text[])"
                " WITH ORDINALITY AS t(k, v, n) ORDER BY n"
                " ON CONFLICT (kind, value) DO NOTHING RETURNING id",
                [k for k, _ in batch], [v for _, v in batch])
            return len(rows)

        return await self._run("add_scope_rules", job)

    async def scope_rules(self, after: int = 0) -> list[ScopeRule]:
        async def job(conn: Conn) -> list[ScopeRule]:
            rows = await conn.fetch(
                "SELECT id, kind, value FROM scope_rules WHERE id > $1 ORDER BY id", after)
            return [ScopeRule(r["kind"], r["value"], int(r["id"])) for r in rows]

        return await self._run("scope_rules", job, write=False)


def _one(row: Any) -> Any:
    if row is None:
        raise StoreError("the server returned no row")
    return row


def _pg_type(column: str) -> str:
    if column == "host_key":
        return "text"
    if column in ("shard", "throttle_events", "failures", "in_flight"):
        return "bigint"
    return "float8"
