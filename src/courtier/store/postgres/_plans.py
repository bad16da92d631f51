"""PostgreSQL statements of the refresh plan: URL values, host tiers, planned load by tier.

Values and tiers written by a commit travel in its ``courtier_commit`` rows (migration
15) and are set by the commit's own UPDATE of the row, so a stale commit writes none.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from courtier.store.base import UNPLANNED_TIER, HostTierRecord
from courtier.store.postgres._rows import QUEUED, Conn, key_shard


async def set_values(conn: Conn, items: Sequence[tuple[bytes, float | None]]) -> int:
    if not items:
        return 0
    changed = await conn.fetchval(
        "WITH v AS (UPDATE urls u SET value = i.value"
        " FROM unnest($1::integer[], $2::bytea[], $3::double precision[])"
        " AS i(shard, url_key, value)"
        " WHERE u.shard = i.shard AND u.url_key = i.url_key RETURNING 1)"
        " SELECT count(*) FROM v",
        [key_shard(k) for k, _ in items], [k for k, _ in items], [v for _, v in items])
    return int(changed or 0)


async def url_values(conn: Conn, url_keys: Collection[bytes]) -> dict[bytes, float]:
    keys = list(url_keys)
    if not keys:
        return {}
    rows = await conn.fetch(
        "SELECT u.url_key, u.value FROM unnest($1::integer[], $2::bytea[]) AS i(shard, url_key)"
        " JOIN urls u ON u.shard = i.shard AND u.url_key = i.url_key"
        " WHERE u.value IS NOT NULL", [key_shard(k) for k in keys], keys)
    return {bytes(r["url_key"]): float(r["value"]) for r in rows}


async def set_host_tier(conn: Conn, record: HostTierRecord, now: float) -> None:
    if record.is_empty():
        await conn.execute("DELETE FROM host_tiers WHERE host_key = $1", record.host_key)
        return
    await conn.execute(
        "INSERT INTO host_tiers (host_key, tier, min_interval, max_interval, value_factor,"
        " updated_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (host_key) DO UPDATE SET"
        " tier = EXCLUDED.tier, min_interval = EXCLUDED.min_interval,"
        " max_interval = EXCLUDED.max_interval, value_factor = EXCLUDED.value_factor,"
        " updated_at = EXCLUDED.updated_at",
        record.host_key, record.tier, record.min_interval, record.max_interval,
        record.value_factor, now)


async def host_tiers(conn: Conn, host_keys: Collection[str]) -> dict[str, HostTierRecord]:
    rows = await conn.fetch(
        "SELECT host_key, tier, min_interval, max_interval, value_factor FROM host_tiers"
        " WHERE host_key = ANY($1::text[])", list(host_keys))
    return {r["host_key"]: HostTierRecord(r["host_key"], r["tier"], r["min_interval"],
                                          r["max_interval"], r["value_factor"]) for r in rows}


async def tier_counts(conn: Conn, shards: Sequence[int], until: float) -> dict[str, int]:
    rows = await conn.fetch(
        "SELECT tier, count(*) AS n FROM urls WHERE shard = ANY($1::integer[])"
        f" AND state = {QUEUED} AND next_fetch_at < $2 GROUP BY tier",
        sorted(set(shards)), until)
    return {(r["tier"] or UNPLANNED_TIER): int(r["n"]) for r in rows}
