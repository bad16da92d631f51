"""Transaction bodies of the SQLite store for URL intake and shard leases.

Each function takes the store's connection and runs inside a transaction
opened by :class:`courtier.store.sqlite.store.SqliteStore`; none of them
commits or rolls back itself. Lists of shards and host keys are passed as
one JSON array parameter (``json_each``) so there is no bound-variable limit.
Commit logic lives in :mod:`courtier.store.sqlite._commit`, the refill in
:mod:`courtier.store.sqlite._refill`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence
from typing import Any

from courtier.store.base import DayCount, HostRecord, NewUrl, PayloadLocation, UrlState
from courtier.store.sqlite._refill import enter_queue, refresh_levels

QUEUED = int(UrlState.QUEUED)
SCHEDULED = int(UrlState.SCHEDULED)
RETIRED = int(UrlState.RETIRED)

_URL_COLUMNS = (
    "url_key, url, host_key, shard, depth, priority, state, version, discovered_at,"
    " next_fetch_at, redirect_hops, sitemap_changefreq, sitemap_lastmod, redirect_chain"
)
_URL_VALUES = f"(?, ?, ?, ?, ?, ?, {QUEUED}, 0, ?, ?, ?, ?, ?, ?)"
#: rows per multi-row INSERT (12 bound values each, far below SQLite's 32766)
_INSERT_ROWS = 1000


def as_json_list(values: Collection[Any]) -> str:
    """A JSON array for ``json_each(?)``."""
    return json.dumps(list(values))


def insert_urls(conn: sqlite3.Connection, urls: Sequence[NewUrl]) -> int:
    """INSERT OR IGNORE the URLs; return how many were new.

    Multi-row INSERTs whose ``RETURNING`` lists exactly the rows that were new,
    which are then folded into host_queue (a known key changes nothing).
    """
    new = 0
    for start in range(0, len(urls), _INSERT_ROWS):
        chunk = urls[start : start + _INSERT_ROWS]
        params: list[Any] = []
        for u in chunk:
            params += (u.url_key, u.url, u.host_key, u.shard, u.depth, u.priority,
                       u.discovered_at, u.next_fetch_at, u.redirect_hops,
                       u.sitemap_changefreq, u.sitemap_lastmod, u.redirect_chain)
        rows = conn.execute(
            f"INSERT OR IGNORE INTO urls ({_URL_COLUMNS}) VALUES "
            + ", ".join([_URL_VALUES] * len(chunk))
            + " RETURNING shard, host_key, next_fetch_at, priority",
            params,
        ).fetchall()
        enter_queue(conn, rows)
        new += len(rows)
    return new


def reset_scheduled(conn: sqlite3.Connection, shards: Sequence[int]) -> int:
    """SCHEDULED → QUEUED for these shards; return how many rows changed."""
    if not shards:
        return 0
    rows = conn.execute(
        f"UPDATE urls SET state = {QUEUED}"
        f" WHERE shard IN (SELECT value FROM json_each(?)) AND state = {SCHEDULED}"
        " RETURNING shard, host_key, next_fetch_at, priority",
        (as_json_list(shards),),
    ).fetchall()
    enter_queue(conn, rows)
    return len(rows)


def release(conn: sqlite3.Connection, items: Sequence[tuple[bytes, float]]) -> int:
    """SCHEDULED → QUEUED with a new next_fetch_at; version untouched. Rows changed."""
    if not items:
        return 0
    requeued = [
        row
        for url_key, at in items
        for row in conn.execute(
            f"UPDATE urls SET state = {QUEUED}, next_fetch_at = ?"
            f" WHERE url_key = ? AND state = {SCHEDULED}"
            " RETURNING shard, host_key, next_fetch_at, priority",
            (at, url_key),
        )
    ]
    enter_queue(conn, requeued)
    return len(requeued)


def postpone(conn: sqlite3.Connection, items: Sequence[tuple[bytes, int, float]]) -> int:
    """QUEUED rows still at their version → a later next_fetch_at; their levels are
    recomputed (one seek each: the row stayed in its level). Rows changed."""
    moved = [
        row
        for url_key, version, at in items
        for row in conn.execute(
            "UPDATE urls SET next_fetch_at = ?"
            f" WHERE url_key = ? AND state = {QUEUED} AND version = ?"
            " RETURNING shard, host_key, priority",
            (at, url_key, version),
        )
    ]
    refresh_levels(conn, {(int(s), str(h), int(p)) for s, h, p in moved})
    return len(moved)


def seed_urls(conn: sqlite3.Connection, limit: int) -> list[str]:
    """URLs at depth 0, oldest first (uses the partial index ``urls_seeds``)."""
    rows = conn.execute(
        "SELECT url FROM urls WHERE depth = 0 ORDER BY discovered_at, url LIMIT ?",
        (max(0, limit),),
    )
    return [row[0] for row in rows]


def next_due_at(
    conn: sqlite3.Connection, shards: Sequence[int], pending_only: bool = False
) -> float | None:
    """Earliest next_fetch_at of QUEUED rows; one index probe per shard.

    ``pending_only``: only rows of an unfinished cycle (version 0 or retrying).
    """
    if not shards:
        return None
    pending = " AND (version = 0 OR failure_count > 0)" if pending_only else ""
    row = conn.execute(
        "SELECT MIN(m) FROM (SELECT (SELECT MIN(next_fetch_at) FROM urls"
        f" WHERE shard = j.value AND state = {QUEUED}{pending}) AS m FROM json_each(?) AS j)",
        (as_json_list(shards),),
    ).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def pending_counts(conn: sqlite3.Connection, shards: Sequence[int]) -> tuple[int, int]:
    """(never fetched, retrying) QUEUED rows of these shards; a range scan per shard."""
    if not shards:
        return 0, 0
    row = conn.execute(
        "SELECT COALESCE(SUM(version = 0), 0), COALESCE(SUM(version > 0 AND failure_count > 0), 0)"
        f" FROM urls WHERE state = {QUEUED} AND shard IN (SELECT value FROM json_each(?))",
        (as_json_list(shards),),
    ).fetchone()
    return int(row[0]), int(row[1])


def due_within(conn: sqlite3.Connection, shards: Sequence[int], until: float) -> int:
    """QUEUED rows with next_fetch_at < until; one index range count per shard."""
    if not shards:
        return 0
    row = conn.execute(
        "SELECT SUM(n) FROM (SELECT (SELECT COUNT(*) FROM urls WHERE shard = j.value"
        f" AND state = {QUEUED} AND next_fetch_at < ?) AS n FROM json_each(?) AS j)",
        (until, as_json_list(shards)),
    ).fetchone()
    return int(row[0] or 0)


_HOST_COLUMNS = (
    "host_key, shard, robots_status, robots_body, robots_fetched_at, robots_expires_at,"
    " robots_digest, crawl_delay, backoff_until, policy_delay, policy_max_in_flight,"
    " policy_max_pages, blocked, fetched, errors, bytes, ttfb_sum, https_upgrade,"
    " robots_error_kind, robots_error, robots_error_since, robots_error_at"
)


def load_host(conn: sqlite3.Connection, host_key: str) -> HostRecord | None:
    row = conn.execute(
        f"SELECT {_HOST_COLUMNS} FROM hosts WHERE host_key = ?", (host_key,)
    ).fetchone()
    if row is None:
        return None
    return HostRecord(
        host_key=row[0],
        shard=row[1],
        robots_status=row[2],
        robots_body=None if row[3] is None else bytes(row[3]),
        robots_fetched_at=row[4],
        robots_expires_at=row[5],
        robots_digest=row[6],
        crawl_delay=row[7],
        backoff_until=row[8],
        policy_delay=row[9],
        policy_max_in_flight=row[10],
        policy_max_pages=row[11],
        blocked=bool(row[12]),
        fetched=row[13],
        errors=row[14],
        bytes=row[15],
        ttfb_sum=row[16],
        https_upgrade=row[17],
        robots_error_kind=row[18],
        robots_error=row[19],
        robots_error_since=row[20],
        robots_error_at=row[21],
    )


def save_robots(conn: sqlite3.Connection, record: HostRecord, now: float) -> None:
    """Upsert exactly the robots fields of ``record``; policy and counters are kept.

    A ``robots_body`` of None keeps the stored body: it is the last good copy,
    which RFC 9309 says to keep obeying while robots.txt is unreachable."""
    conn.execute(
        "INSERT INTO hosts (host_key, shard, robots_status, robots_body, robots_fetched_at,"
        " robots_expires_at, robots_digest, crawl_delay, robots_error_kind, robots_error,"
        " robots_error_since, robots_error_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (host_key) DO UPDATE SET shard = excluded.shard,"
        " robots_status = excluded.robots_status,"
        " robots_body = COALESCE(excluded.robots_body, robots_body),"
        " robots_fetched_at = excluded.robots_fetched_at,"
        " robots_expires_at = excluded.robots_expires_at,"
        " robots_digest = excluded.robots_digest, crawl_delay = excluded.crawl_delay,"
        " robots_error_kind = excluded.robots_error_kind,"
        " robots_error = excluded.robots_error,"
        " robots_error_since = excluded.robots_error_since,"
        " robots_error_at = excluded.robots_error_at,"
        " updated_at = excluded.updated_at",
        (
            record.host_key,
            record.shard,
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
        ),
    )


def save_backoff(
    conn: sqlite3.Connection, host_key: str, shard: int, until: float, now: float
) -> None:
    """Upsert a host's back-off end (a pause survives a restart)."""
    conn.execute(
        "INSERT INTO hosts (host_key, shard, backoff_until, updated_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (host_key) DO UPDATE SET backoff_until = excluded.backoff_until,"
        " updated_at = excluded.updated_at",
        (host_key, shard, until, now),
    )


def save_https_upgrade(conn: sqlite3.Connection, host_key: str, shard: int,
                       https_host_key: str | None, now: float) -> None:
    """Upsert the https host key an http host's URLs go to (None: fetched as http)."""
    conn.execute(
        "INSERT INTO hosts (host_key, shard, https_upgrade, updated_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (host_key) DO UPDATE SET https_upgrade = excluded.https_upgrade,"
        " updated_at = excluded.updated_at",
        (host_key, shard, https_host_key, now),
    )


def load_day_counts(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, DayCount]:
    out: dict[str, DayCount] = {}
    for start in range(0, len(keys), 500):  # stay under SQLite's bound-parameter limit
        chunk = keys[start:start + 500]
        marks = ",".join("?" * len(chunk))
        for key, day_start, used in conn.execute(
            f"SELECT budget_key, day_start, used FROM day_counts WHERE budget_key IN ({marks})",
            chunk,
        ):
            out[key] = DayCount(key, day_start, used)
    return out


def set_policy(
    conn: sqlite3.Connection,
    host_key: str,
    shard: int,
    policy: tuple[float | None, int | None, int | None, bool],
    now: float,
) -> None:
    """Upsert a host's policy override; robots fields and counters are kept."""
    delay, max_in_flight, max_pages, blocked = policy
    conn.execute(
        "INSERT INTO hosts (host_key, shard, policy_delay, policy_max_in_flight,"
        " policy_max_pages, blocked, updated_at, policy_updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (host_key) DO UPDATE SET shard = excluded.shard,"
        " policy_delay = excluded.policy_delay,"
        " policy_max_in_flight = excluded.policy_max_in_flight,"
        " policy_max_pages = excluded.policy_max_pages, blocked = excluded.blocked,"
        " updated_at = excluded.updated_at, policy_updated_at = excluded.updated_at",
        (host_key, shard, delay, max_in_flight, max_pages, int(blocked), now, now),
    )


def policies_changed(conn: sqlite3.Connection, since: float) -> list[HostRecord]:
    """Hosts whose policy changed after ``since`` (uses the partial index)."""
    keys = [
        r[0]
        for r in conn.execute(
            "SELECT host_key FROM hosts WHERE policy_updated_at > ? ORDER BY policy_updated_at",
            (since,),
        )
    ]
    return [rec for rec in (load_host(conn, k) for k in keys) if rec is not None]


FETCH_LOG_COLUMNS = (
    "id", "url_key", "version", "fetched_at", "status", "outcome", "robots_digest",
    "delay_applied", "error_kind",
)


def fetch_log(
    conn: sqlite3.Connection, after: int, limit: int, url_key: bytes | None
) -> list[dict[str, Any]]:
    cols = ", ".join(FETCH_LOG_COLUMNS)
    if url_key is None:
        rows = conn.execute(
            f"SELECT {cols} FROM fetch_log WHERE id > ? ORDER BY id LIMIT ?", (after, limit)
        )
    else:
        rows = conn.execute(
            f"SELECT {cols} FROM fetch_log WHERE url_key = ? AND id > ? ORDER BY id LIMIT ?",
            (url_key, after, limit),
        )
    out = []
    for row in rows:
        item = dict(zip(FETCH_LOG_COLUMNS, row, strict=True))
        item["url_key"] = bytes(item["url_key"]).hex()
        out.append(item)
    return out


def payload_locations(
    conn: sqlite3.Connection, digests: Sequence[str]
) -> dict[str, PayloadLocation]:
    """The stored first copies of these digests (one bound value: a JSON array)."""
    rows = conn.execute(
        "SELECT digest, warc_file, warc_offset, url, fetched_at FROM payloads"
        " WHERE digest IN (SELECT value FROM json_each(?))",
        (as_json_list(digests),),
    )
    return {row[0]: (row[1], int(row[2]), row[3], float(row[4])) for row in rows}
