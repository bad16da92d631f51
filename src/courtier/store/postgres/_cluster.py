"""SQL of the cluster half of the PostgreSQL store (contract: store/cluster.py; schema
and functions: migration 0007): the fencing of URL calls by shard epoch, the lock order
of lease rows and the statements :class:`~courtier.store.postgres.store.PostgresStore`
runs for the cluster methods. Module functions taking the connection; no state.

Every lease, heartbeat and IP-slot time is the server's ``clock_timestamp()``
(``courtier_now()``): the ``now`` arguments of the protocol are ignored here, so
workers with skewed clocks still agree on who owns what. Decisions that read then
write (an acquisition, a day-count grant, an IP slot) lock their rows first, in a
fixed order, inside one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from courtier.core.errors import StoreError
from courtier.store.cluster import HostClock
from courtier.store.postgres._rows import Conn

CLOCK_COLUMNS = tuple(f.name for f in fields(HostClock))

#: one statement, one snapshot: store now, workers, leases and counters
VIEW_SQL = """
SELECT courtier_now() AS now,
  (SELECT coalesce(jsonb_agg(jsonb_build_array(worker_id, weight, heartbeat_at, started_at,
                                               info) ORDER BY worker_id), '[]')
     FROM workers WHERE heartbeat_at IS NOT NULL) AS workers,
  (SELECT coalesce(jsonb_agg(jsonb_build_array(s.shard, s.owner, s.epoch,
                                               coalesce(w.lease_expires_at, 0), s.acquired_at)
                             ORDER BY s.shard), '[]')
     FROM shards s LEFT JOIN workers w ON w.worker_id = s.owner
    WHERE $1::integer[] IS NULL OR s.shard = ANY($1::integer[])) AS leases,
  (SELECT jsonb_object_agg(name, value) FROM cluster_counters) AS counters
"""


#: Citus: the advisory lock of one shard's fence (keys FENCE_LOCK and the shard), taken on
#: the coordinator: shared by a URL call fenced by the shard's epoch (and by the commit,
#: citus/commit.sql), exclusive by every lease change of the shard
FENCE_LOCK = 1129270870
#: Citus: the advisory lock every lease change takes (keys LEASE_LOCK and 0): after its
#: fence locks, before it writes ``shards``
LEASE_LOCK = 1129270871

_FENCE_SHARED = ("SELECT pg_advisory_xact_lock_shared($1, l.s)"
                 " FROM (SELECT DISTINCT s FROM unnest($2::integer[]) AS s ORDER BY s) AS l")
_FENCE_EXCLUSIVE = ("SELECT pg_advisory_xact_lock($1, l.s)"
                    " FROM (SELECT DISTINCT s FROM unnest($2::integer[]) AS s ORDER BY s) AS l")


async def fenced_shards(conn: Conn, epochs: Mapping[int, int],
                        on_citus: bool = False) -> set[int]:
    """The shards of ``epochs`` whose stored epoch (0 if never leased) is the given one,
    fenced until the transaction ends: a takeover waits, so the check holds for the rest
    of the transaction. Plain PostgreSQL: their rows locked ``FOR SHARE`` (a takeover
    locks them FOR UPDATE). Citus (``on_citus``): a shared advisory lock per shard on the
    coordinator, in shard order, then the epochs read in a statement of their own (its
    snapshot after the locks); no row lock of the ``shards`` reference table, which
    Citus turns into a lock of the whole table (docs/scale-out.md, "Citus: as built")."""
    items = sorted(epochs.items())
    wanted = [s for s, _ in items]
    if on_citus:
        await conn.execute(_FENCE_SHARED, FENCE_LOCK, wanted)
        rows = await conn.fetch(
            "SELECT shard, epoch FROM shards WHERE shard = ANY($1::integer[])", wanted)
    else:
        rows = await conn.fetch(
            "SELECT shard, epoch FROM shards WHERE shard = ANY($1::integer[])"
            " ORDER BY shard FOR SHARE", wanted)
    stored = {int(r["shard"]): int(r["epoch"]) for r in rows}
    return {s for s, e in items if stored.get(s, 0) == e}


async def lock_in_order(conn: Conn, shards: Sequence[int], on_citus: bool = False) -> None:
    """Lock lease rows in shard order, as acquisitions do, so that a renewal or a release
    racing an acquisition of the same shards waits instead of deadlocking. Citus
    (``on_citus``), before a change of owners or epochs (an acquisition, a release): each
    shard's fence lock exclusively, in shard order, then the lease changes' one lock, all
    advisory locks on the coordinator (see :func:`fenced_shards`): the change waits for
    the fenced calls in flight on its shards, and its own writes of ``shards`` then wait
    for no one but a lease change."""
    if on_citus:
        await conn.execute(_FENCE_EXCLUSIVE, FENCE_LOCK, sorted(shards))
        await conn.execute("SELECT pg_advisory_xact_lock($1, 0)", LEASE_LOCK)
        return
    await conn.execute("SELECT 1 FROM shards WHERE shard = ANY($1::integer[])"
                       " ORDER BY shard FOR UPDATE", sorted(shards))


async def lock_for_acquisition(conn: Conn, owner: str, shards: Sequence[int],
                               on_citus: bool = False) -> list[int]:
    """Before ``courtier_acquire_shards``: the shards it may act on. Plain PostgreSQL:
    all of them (the function locks their rows itself). Citus: an acquisition is also
    every round's renewal of the shards the owner holds, which changes no owner or
    epoch, and a shard another worker holds under a live lease it leaves alone; only
    the shards it may take (free, never leased, or under an expired lease) get their
    fence locks, exclusively in shard order, then the lease changes' lock (as
    :func:`lock_in_order`). Waiting for the fenced calls of shards it will not change
    (its own commits and refills, or another worker's) made rounds take seconds on a
    loaded cluster, and leases lapsed. The call then acts on the shards it locked and
    on those the owner still holds under the lock; one it held at the first look but
    no longer does (taken over meanwhile) is left out: it was not fenced, and its new
    lease is fresh anyway. Another worker's lease that expires after the first look
    waits for the next round."""
    wanted = sorted(set(shards))
    if not on_citus:
        return wanted
    rows = await conn.fetch(
        "SELECT s.shard, s.owner = $2 AS mine, s.owner IS NULL"
        " OR coalesce(w.lease_expires_at, 0) <= courtier_now() AS takeable"
        " FROM shards s LEFT JOIN workers w ON w.worker_id = s.owner"
        " WHERE s.shard = ANY($1::integer[])", wanted, owner)
    known = {int(r["shard"]): (bool(r["mine"]), bool(r["takeable"])) for r in rows}
    takeable = [s for s in wanted
                if s not in known or (not known[s][0] and known[s][1])]
    await lock_in_order(conn, takeable, on_citus=True)
    held = await conn.fetch(
        "SELECT shard FROM shards WHERE shard = ANY($1::integer[]) AND owner = $2",
        wanted, owner)
    return sorted({int(r["shard"]) for r in held} | set(takeable))


async def lock_for_renewal(conn: Conn, on_citus: bool = False) -> None:
    """Before a renewal (of the owner's one worker lease, migrations 0034 and 0039: by
    ``renew_shards`` or by a heartbeat). Plain
    PostgreSQL: nothing; the renewal's update of the lease row is its lock, and a taker
    reads that row only FOR SHARE (the migration says how the two serialise). On Citus
    the lease changes' one lock: under it a renewal and any acquisition run one after
    the other (no row lock of a reference table, which Citus turns into a lock of the
    whole table), and it need not wait for the fenced calls in flight (a commit or a
    refill of its own worker, seconds on a loaded cluster: renewals waiting for them
    let the leases lapse)."""
    if on_citus:
        await conn.execute("SELECT pg_advisory_xact_lock($1, 0)", LEASE_LOCK)


#: the renewal of an owner's worker lease (its ``workers`` row, migration 0039), every
#: shard it owns with it; an owner without a row gets a lease row (no heartbeat: no member)
RENEW_WORKER_LEASE = (
    "INSERT INTO workers AS w (worker_id, weight, heartbeat_at, started_at, info,"
    " lease_expires_at) WITH t AS MATERIALIZED (SELECT courtier_now() AS now)"
    " SELECT $1, 0, NULL, t.now, '{}', t.now + $2 FROM t"
    " ON CONFLICT (worker_id) DO UPDATE SET lease_expires_at = EXCLUDED.lease_expires_at")

def heartbeat_sql(renew: bool) -> str:
    """A heartbeat (``$1`` id, ``$2`` weight, ``$3`` info, ``$4`` lease length), and when
    ``renew`` the renewal of the worker's lease until the same store now + ``$4``, in one
    statement writing one row (migration 0039); one reading of the clock for every column
    (Citus would read it once a column otherwise). ``started_at`` is kept from the first
    heartbeat (a lease row has none yet); a new row's lease is 0 (none) when ``$4`` is
    minus infinity. Two texts rather than a parameter in the
    conflict clause: Citus plans this INSERT … SELECT through the coordinator and cannot
    type a parameter there."""
    lease = ", lease_expires_at = EXCLUDED.lease_expires_at" if renew else ""
    return (
        "INSERT INTO workers AS w (worker_id, weight, heartbeat_at, started_at, info,"
        " lease_expires_at) WITH t AS MATERIALIZED (SELECT courtier_now() AS now)"
        " SELECT $1::text, $2::float8, t.now, t.now, $3::jsonb,"
        " greatest(t.now + $4::float8, 0) FROM t"
        " ON CONFLICT (worker_id) DO UPDATE SET weight = EXCLUDED.weight,"
        " heartbeat_at = EXCLUDED.heartbeat_at, info = EXCLUDED.info,"
        " started_at = CASE WHEN w.heartbeat_at IS NULL THEN EXCLUDED.started_at"
        f" ELSE w.started_at END{lease} RETURNING heartbeat_at")


HEARTBEAT = heartbeat_sql(renew=False)
HEARTBEAT_RENEWING = heartbeat_sql(renew=True)

#: a graceful exit: the row goes, or stays a lease row (no heartbeat) while its lease is
#: live (the contract: leaving leaves the leases alone; release them first)
LEAVE = (
    "UPDATE workers SET heartbeat_at = NULL WHERE worker_id = $1",
    "DELETE FROM workers WHERE worker_id = $1 AND lease_expires_at <= courtier_now()",
)

#: rows silent for more than ``$1`` seconds (heartbeat; a lease row: its lease's end)
#: whose lease has ended: workers long dead, their membership and lease at once
PRUNE = (
    "DELETE FROM workers w WHERE coalesce(w.heartbeat_at, w.lease_expires_at)"
    " < courtier_now() - $1 AND w.lease_expires_at <= courtier_now()"
    " RETURNING w.worker_id, w.heartbeat_at IS NOT NULL AS member")

#: after :data:`RENEW_WORKER_LEASE`, in a statement of its own: the shards of the renewal
#: (``$1``, at the epochs ``$2``) the owner ``$3`` still owns
STILL_OWNED = (
    "SELECT s.shard FROM shards s JOIN unnest($1::integer[], $2::bigint[]) AS t(shard, epoch)"
    " ON s.shard = t.shard AND s.epoch = t.epoch WHERE s.owner = $3")


#: each shard's ``$2`` most recently fetched fingerprints: one range of
#: ``urls_recent_simhash`` a shard (migration 0019), whatever the shard's size
RECENT_SIMHASHES = (
    "SELECT s.shard, u.url_key, u.simhash FROM unnest($1::integer[]) AS s(shard)"
    " CROSS JOIN LATERAL (SELECT url_key, simhash, last_fetch_at FROM urls"
    "   WHERE urls.shard = s.shard AND simhash IS NOT NULL"
    "   ORDER BY last_fetch_at DESC NULLS LAST, url_key LIMIT $2) AS u"
    " ORDER BY s.shard, u.last_fetch_at DESC NULLS LAST, u.url_key")


def one_row(row: Any) -> Any:
    if row is None:
        raise StoreError("the server returned no row")
    return row


def pg_type(column: str) -> str:
    if column == "host_key":
        return "text"
    if column in ("shard", "throttle_events", "failures", "in_flight"):
        return "bigint"
    return "float8"
