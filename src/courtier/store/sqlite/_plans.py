"""SQLite statements of the refresh plan: URL values, host tiers, planned load by tier."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence

from courtier.store.base import UNPLANNED_TIER, HostTierRecord
from courtier.store.sqlite._queries import QUEUED, as_json_list

_CHUNK = 500  # bound variables per IN (...) lookup


def set_values(conn: sqlite3.Connection, items: Sequence[tuple[bytes, float | None]]) -> int:
    cur = conn.executemany("UPDATE urls SET value = ? WHERE url_key = ?",
                           [(value, key) for key, value in items])
    return int(cur.rowcount)


def url_values(conn: sqlite3.Connection, url_keys: Collection[bytes]) -> dict[bytes, float]:
    keys = list(url_keys)
    out: dict[bytes, float] = {}
    for i in range(0, len(keys), _CHUNK):
        chunk = keys[i:i + _CHUNK]
        marks = ",".join("?" * len(chunk))
        for key, value in conn.execute(
                f"SELECT url_key, value FROM urls WHERE url_key IN ({marks})"
                " AND value IS NOT NULL", chunk):
            out[bytes(key)] = float(value)
    return out


def set_host_tier(conn: sqlite3.Connection, record: HostTierRecord, now: float) -> None:
    if record.is_empty():
        conn.execute("DELETE FROM host_tiers WHERE host_key = ?", (record.host_key,))
        return
    conn.execute(
        "INSERT INTO host_tiers (host_key, tier, min_interval, max_interval, value_factor,"
        " updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (host_key) DO UPDATE SET"
        " tier = excluded.tier, min_interval = excluded.min_interval,"
        " max_interval = excluded.max_interval, value_factor = excluded.value_factor,"
        " updated_at = excluded.updated_at",
        (record.host_key, record.tier, record.min_interval, record.max_interval,
         record.value_factor, now))


def host_tiers(conn: sqlite3.Connection,
               host_keys: Collection[str]) -> dict[str, HostTierRecord]:
    keys = list(host_keys)
    out: dict[str, HostTierRecord] = {}
    for i in range(0, len(keys), _CHUNK):
        chunk = keys[i:i + _CHUNK]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(
                "SELECT host_key, tier, min_interval, max_interval, value_factor"
                f" FROM host_tiers WHERE host_key IN ({marks})", chunk):
            out[row[0]] = HostTierRecord(*row)
    return out


def tier_counts(conn: sqlite3.Connection, shards: Sequence[int], until: float) -> dict[str, int]:
    """One index range per shard (urls_due), grouped by tier."""
    if not shards:
        return {}
    rows = conn.execute(
        "SELECT u.tier, COUNT(*) FROM json_each(?) AS j JOIN urls AS u"
        f" ON u.shard = j.value AND u.state = {QUEUED} AND u.next_fetch_at < ?"
        " GROUP BY u.tier", (as_json_list(shards), until)).fetchall()
    return {tier or UNPLANNED_TIER: int(n) for tier, n in rows}
