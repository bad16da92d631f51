"""Transaction bodies of the PostgreSQL store: hosts, requeues, figures (leases: _cluster).

Each function takes a connection inside a transaction opened by
:class:`courtier.store.postgres.store.PostgresStore` and does not commit itself.
Hosts are keyed ``(shard, host_key)`` with the shard derived from the host key,
so every host lookup names its shard.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from courtier.store.base import HostRecord, PayloadLocation
from courtier.store.postgres._rows import (
    HOST_COLUMNS,
    QUEUED,
    SCHEDULED,
    Conn,
    host_record,
    host_shard,
)

#: a shard's SCHEDULED rows back to QUEUED: ranges of ``urls_scheduled`` (migration 0020),
#: whatever the shards' size
RESET_SCHEDULED = (
    f"UPDATE urls SET state = {QUEUED} WHERE shard = ANY($1::integer[])"
    f" AND state = {SCHEDULED} RETURNING shard, host_key, next_fetch_at, priority")


async def reset_scheduled(conn: Conn, shards: Sequence[int]) -> int:
    """SCHEDULED → QUEUED for these shards; their hosts regain queued rows."""
    wanted = sorted(set(shards))
    if not wanted:
        return 0
    rows = await conn.fetch(RESET_SCHEDULED, wanted)
    await queue_add(conn, rows)
    return len(rows)


async def queue_add(conn: Conn, rows: Sequence[Any]) -> None:
    """Hosts gained QUEUED rows (records with shard, host_key, next_fetch_at, priority)."""
    if rows:
        await conn.execute(
            "SELECT courtier_queue_add($1, $2, $3, $4)",
            [r["shard"] for r in rows],
            [r["host_key"] for r in rows],
            [r["next_fetch_at"] for r in rows],
            [r["priority"] for r in rows],
        )


async def load_host(conn: Conn, host_key: str) -> HostRecord | None:
    row = await conn.fetchrow(
        f"SELECT {HOST_COLUMNS} FROM hosts WHERE shard = $1 AND host_key = $2",
        host_shard(host_key),
        host_key,
    )
    return None if row is None else host_record(row)


async def save_robots(conn: Conn, record: HostRecord, now: float) -> None:
    """Upsert the robots fields; a ``robots_body`` of None keeps the stored body."""
    await conn.execute(
        "INSERT INTO hosts AS h (shard, host_key, robots_status, robots_body, robots_fetched_at,"
        " robots_expires_at, robots_digest, crawl_delay, robots_error_kind, robots_error,"
        " robots_error_since, robots_error_at, updated_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
        " ON CONFLICT (shard, host_key) DO UPDATE SET robots_status = EXCLUDED.robots_status,"
        " robots_body = COALESCE(EXCLUDED.robots_body, h.robots_body),"
        " robots_fetched_at = EXCLUDED.robots_fetched_at,"
        " robots_expires_at = EXCLUDED.robots_expires_at,"
        " robots_digest = EXCLUDED.robots_digest, crawl_delay = EXCLUDED.crawl_delay,"
        " robots_error_kind = EXCLUDED.robots_error_kind,"
        " robots_error = EXCLUDED.robots_error,"
        " robots_error_since = EXCLUDED.robots_error_since,"
        " robots_error_at = EXCLUDED.robots_error_at,"
        " updated_at = EXCLUDED.updated_at",
        host_shard(record.host_key),
        record.host_key,
        record.robots_status,
        record.robots_body,
        record.robots_fetched_at,
        record.robots_expires_at,
        record.robots_digest,
        record.crawl_delay,
        record.robots_error_kind,
        record.robots_error,
        record.robots_error_since,
        record.robots_error_at,
        now,
    )


async def save_backoff(conn: Conn, host_key: str, until: float, now: float) -> None:
    await conn.execute(
        "INSERT INTO hosts (shard, host_key, backoff_until, updated_at) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT (shard, host_key) DO UPDATE SET backoff_until = EXCLUDED.backoff_until,"
        " updated_at = EXCLUDED.updated_at",
        host_shard(host_key),
        host_key,
        until,
        now,
    )


async def save_https_upgrade(conn: Conn, host_key: str, https_host_key: str | None,
                             now: float) -> None:
    await conn.execute(
        "INSERT INTO hosts (shard, host_key, https_upgrade, updated_at) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT (shard, host_key) DO UPDATE SET https_upgrade = EXCLUDED.https_upgrade,"
        " updated_at = EXCLUDED.updated_at",
        host_shard(host_key),
        host_key,
        https_host_key,
        now,
    )


async def set_policy(
    conn: Conn,
    host_key: str,
    policy: tuple[float | None, int | None, int | None, bool],
    now: float,
) -> None:
    delay, max_in_flight, max_pages, blocked = policy
    await conn.execute(
        "INSERT INTO hosts (shard, host_key, policy_delay, policy_max_in_flight,"
        " policy_max_pages, blocked, updated_at, policy_updated_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $7)"
        " ON CONFLICT (shard, host_key) DO UPDATE SET policy_delay = EXCLUDED.policy_delay,"
        " policy_max_in_flight = EXCLUDED.policy_max_in_flight,"
        " policy_max_pages = EXCLUDED.policy_max_pages, blocked = EXCLUDED.blocked,"
        " updated_at = EXCLUDED.updated_at, policy_updated_at = EXCLUDED.policy_updated_at",
        host_shard(host_key),
        host_key,
        delay,
        max_in_flight,
        max_pages,
        blocked,
        now,
    )


async def policies_changed(conn: Conn, since: float) -> list[HostRecord]:
    rows = await conn.fetch(
        f"SELECT {HOST_COLUMNS} FROM hosts WHERE policy_updated_at > $1"
        " ORDER BY policy_updated_at",
        since,
    )
    return [host_record(r) for r in rows]


FETCH_LOG_COLUMNS = (
    "id", "url_key", "version", "fetched_at", "status", "outcome", "robots_digest",
    "delay_applied", "error_kind",
)


#: the first id window of a read of the whole audit log, in rows asked for
_ID_WINDOW = 4


async def _fetch_log_by_id(conn: Conn, after: int, limit: int) -> list[Any]:
    """The audit rows with ``id > after`` in id order, at most ``limit``, read as bounded
    id windows: the day partitions index ``id`` by BRIN (migration 0038), which finds a
    window's page ranges but gives no order, so an unbounded ``ORDER BY id LIMIT`` would
    read every row above ``after`` for each page. A window that holds too few rows is
    followed by one twice as wide, until the rows asked for are found or no row lies
    above (ids are positive bigints: at most 64 windows)."""
    cols = ", ".join(FETCH_LOG_COLUMNS)
    out: list[Any] = []
    low, width = after, max(1, limit) * _ID_WINDOW
    while len(out) < limit:
        high = min(low + width, 2**63 - 1)
        out += await conn.fetch(
            f"SELECT {cols} FROM fetch_log WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $3",
            low, high, limit - len(out))
        if high >= 2**63 - 1 or (len(out) < limit and not await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM fetch_log WHERE id > $1)", high)):
            break
        low, width = high, width * 2
    return out


async def fetch_log(
    conn: Conn, after: int, limit: int, shard_key: tuple[int, bytes] | None
) -> list[dict[str, Any]]:
    cols = ", ".join(FETCH_LOG_COLUMNS)
    if shard_key is None:
        rows = await _fetch_log_by_id(conn, after, limit)
    else:
        rows = await conn.fetch(
            f"SELECT {cols} FROM fetch_log WHERE shard = $3 AND url_key = $4 AND id > $1"
            " ORDER BY id LIMIT $2",
            after,
            limit,
            *shard_key,
        )
    out = []
    for row in rows:
        item = dict(row)
        item["url_key"] = bytes(item["url_key"]).hex()
        out.append(item)
    return out


async def counts(conn: Conn) -> dict[str, int]:
    # three aggregates joined, not scalar subqueries in the target list: Citus pushes
    # each aggregate down to the nodes, and refuses a subquery beside an aggregate
    row = await conn.fetchrow(
        "SELECT u.*, e.events, h.hosts FROM"
        " (SELECT count(*) AS urls, count(*) FILTER (WHERE state = 0) AS queued,"
        "  count(*) FILTER (WHERE state = 1) AS scheduled,"
        "  count(*) FILTER (WHERE state = 2) AS retired,"
        "  count(last_fetch_at) AS fetched FROM urls) AS u,"
        " (SELECT count(*) AS events FROM events) AS e,"
        " (SELECT count(*) AS hosts FROM hosts) AS h"
    )
    assert row is not None
    return {name: int(row[name]) for name in
            ("urls", "queued", "scheduled", "retired", "fetched", "events", "hosts")}


#: the payload look-up: on plain PostgreSQL a probe of the payloads key for each digest
#: (migration 36: sequential scans off for the statement, never a scan of the table); on
#: Citus the plain statement, which the coordinator routes to the digests' shards (its
#: planner cannot make a distributed plan with sequential scans off)
PAYLOAD_LOCATIONS = ("SELECT digest, warc_file, warc_offset, url, fetched_at"
                     " FROM courtier_payload_locations($1::text[])")
PAYLOAD_LOCATIONS_CITUS = ("SELECT digest, warc_file, warc_offset, url, fetched_at"
                           " FROM payloads WHERE digest = ANY($1::text[])")


async def payload_locations(conn: Conn, digests: list[str],
                            on_citus: bool = False) -> dict[str, PayloadLocation]:
    """The stored first copies of these digests, in one statement."""
    rows = await conn.fetch(PAYLOAD_LOCATIONS_CITUS if on_citus else PAYLOAD_LOCATIONS,
                            digests)
    return {r[0]: (r[1], int(r[2]), r[3], float(r[4])) for r in rows}
