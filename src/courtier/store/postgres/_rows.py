"""Conversions between the Store dataclasses and the PostgreSQL row types.

The batch functions of the schema take arrays of composite types
(``courtier_new_url``, ``courtier_commit``, ``courtier_host_delta``); asyncpg
encodes a Python tuple as one composite value, in the type's field order, which
the tuples built here follow. The shard of every row is read from its key
(:func:`courtier.core.urls.shard_of_key`): a row lives in the partition its key names,
so a caller's ``shard`` that disagrees with its key is refused rather than stored
where no lookup by key would find it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from courtier.core.errors import StoreError
from courtier.core.outcome import Outcome
from courtier.core.urls import shard_of, shard_of_key
from courtier.dedup.fingerprint64 import from_signed64, to_signed64
from courtier.store.base import (
    DueUrl,
    Event,
    FetchCommit,
    HostRecord,
    HostStatsDelta,
    NewUrl,
    UrlState,
)

#: a connection, or the pool's proxy of one
Conn: TypeAlias = "asyncpg.Connection[Any] | PoolConnectionProxy[Any]"

QUEUED = int(UrlState.QUEUED)
SCHEDULED = int(UrlState.SCHEDULED)
RETIRED = int(UrlState.RETIRED)


def key_shard(url_key: bytes, claimed: int | None = None, what: str = "URL") -> int:
    """The shard named by ``url_key``; StoreError if ``claimed`` disagrees."""
    if len(url_key) != 16:
        raise StoreError(f"{what} key must be 16 bytes, got {len(url_key)}")
    shard = shard_of_key(url_key)
    if claimed is not None and claimed != shard:
        raise StoreError(
            f"{what} {url_key.hex()} claims shard {claimed} but its key names shard {shard}"
        )
    return shard


def host_shard(host_key: str) -> int:
    """The shard of a host (the same leading bits as every url_key of the host)."""
    return shard_of(host_key)


def new_url_rows(urls: Iterable[NewUrl]) -> list[tuple[Any, ...]]:
    return [
        (
            key_shard(u.url_key, u.shard, u.url),
            u.url_key,
            u.url,
            u.host_key,
            u.depth,
            u.priority,
            u.discovered_at,
            u.next_fetch_at,
            u.redirect_hops,
            u.sitemap_changefreq,
            u.sitemap_lastmod,
            u.redirect_chain,
        )
        for u in urls
    ]


def commit_rows(commits: Sequence[FetchCommit]) -> list[tuple[Any, ...]]:
    return [
        (
            ord_,
            key_shard(c.url_key, c.shard, c.url),
            c.url_key,
            c.url,
            c.host_key,
            c.version,
            c.epoch,
            RETIRED if c.next_fetch_at is None else QUEUED,
            c.fetched_at,
            c.next_fetch_at,
            c.interval,
            c.status,
            str(c.outcome),
            c.failure_count,
            c.redirect_to,
            c.error_kind,
            c.robots_digest,
            c.delay_applied,
            c.outcome == Outcome.OK,
            c.change_stats,
            c.priority,
            c.etag,
            c.last_modified,
            c.content_type,
            c.payload_digest,
            c.content_length,
            c.title,
            None if c.simhash is None else to_signed64(c.simhash),
            c.near_dup_of,
            c.warc_file,
            c.warc_offset,
            c.warc_length,
            c.event_json(),
            c.value,  # value and tier: attributes added by migration 15
            c.tier,
        )
        for ord_, c in enumerate(commits)
    ]


def host_delta_rows(deltas: Sequence[HostStatsDelta]) -> list[tuple[Any, ...]]:
    return [
        (
            host_shard(d.host_key),
            d.host_key,
            d.fetched,
            d.errors,
            d.bytes,
            d.ttfb_sum,
            d.status_2xx,
            d.status_3xx,
            d.status_4xx,
            d.status_5xx,
        )
        for d in deltas
    ]


def due_url(r: Any) -> DueUrl:
    return DueUrl(
        url_key=bytes(r["url_key"]),
        url=r["url"],
        host_key=r["host_key"],
        shard=r["shard"],
        depth=r["depth"],
        priority=r["priority"],
        version=r["version"],
        next_fetch_at=r["next_fetch_at"],
        redirect_hops=r["redirect_hops"],
        etag=r["etag"],
        last_modified=r["last_modified"],
        failure_count=r["failure_count"],
        payload_digest=r["payload_digest"],
        change_stats=r["change_stats"],
        last_fetch_at=r["last_fetch_at"],
        warc_file=r["warc_file"],
        simhash=None if r["simhash"] is None else from_signed64(r["simhash"]),
        sitemap_changefreq=r["sitemap_changefreq"],
        sitemap_lastmod=r["sitemap_lastmod"],
        redirect_chain=r["redirect_chain"],
        value=r["value"],
    )


HOST_COLUMNS = (
    "host_key, shard, robots_status, robots_body, robots_fetched_at, robots_expires_at,"
    " robots_digest, crawl_delay, backoff_until, policy_delay, policy_max_in_flight,"
    " policy_max_pages, blocked, fetched, errors, bytes, ttfb_sum, https_upgrade,"
    " robots_error_kind, robots_error, robots_error_since, robots_error_at"
)


def host_record(r: Any) -> HostRecord:
    return HostRecord(
        host_key=r["host_key"],
        shard=r["shard"],
        robots_status=r["robots_status"],
        robots_body=None if r["robots_body"] is None else bytes(r["robots_body"]),
        robots_fetched_at=r["robots_fetched_at"],
        robots_expires_at=r["robots_expires_at"],
        robots_digest=r["robots_digest"],
        crawl_delay=r["crawl_delay"],
        backoff_until=r["backoff_until"],
        policy_delay=r["policy_delay"],
        policy_max_in_flight=r["policy_max_in_flight"],
        policy_max_pages=r["policy_max_pages"],
        blocked=bool(r["blocked"]),
        fetched=int(r["fetched"]),
        errors=int(r["errors"]),
        bytes=int(r["bytes"]),
        ttfb_sum=float(r["ttfb_sum"]),
        https_upgrade=r["https_upgrade"],
        robots_error_kind=r["robots_error_kind"],
        robots_error=r["robots_error"],
        robots_error_since=r["robots_error_since"],
        robots_error_at=r["robots_error_at"],
    )


def event_of(r: Any) -> Event:
    """An outbox event from a row read as (position, url_key, version, created_at,
    payload, shard, shard_pos)."""
    return Event(int(r[0]), bytes(r[1]), r[2], r[3], json.loads(r[4]), r[5], r[6])
