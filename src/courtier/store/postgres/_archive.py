"""PostgreSQL side of the archive Store methods: re-parse events, segment states, requeue
of a lost WARC file (migration 0005)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from typing import Any

from courtier.core.errors import StoreError
from courtier.store.base import SEGMENT_STATES, ReparseEvent, SegmentRecord
from courtier.store.event_counts import payload_counter_names
from courtier.store.postgres import _event_counts, _queries, _rows
from courtier.store.postgres._rows import Conn, key_shard


async def add_reparse_events(conn: Conn, events: Sequence[ReparseEvent], now: float) -> int:
    kept = sorted((_rows.key_shard(e.url_key), i) for i, e in enumerate(events)
                  if e.parser_version >= 1)
    # events' lock before any head, as the commit's statement takes them: the retention,
    # which locks events whole and then raises heads' pruned_pos, never waits on us
    await conn.execute("LOCK TABLE events IN ROW EXCLUSIVE MODE")
    # the shards' positions first, in shard order (one lock order with every other writer
    # of a head: docs/scale-out.md, "The outbox cursor"); a position whose insert is then
    # skipped stays unused
    positions = dict(zip(
        (i for _, i in kept),
        await _take_positions(conn, [shard for shard, _ in kept]), strict=True))
    added, counted = 0, Counter[tuple[int, str]]()
    for shard, i in kept:
        event = events[i]
        text = event.payload_json()
        status = await conn.execute(
            # the unique key holds per day partition (migration time_partitions): across days the
            # NOT EXISTS probe keeps one event per key among the events still kept
            "INSERT INTO events (shard, url_key, version, kind, created_at, payload, shard_pos)"
            " SELECT $1, $2, $3, $4, $5, $6, $7 WHERE NOT EXISTS (SELECT 1 FROM events"
            " WHERE shard = $1 AND url_key = $2 AND version = $3 AND kind = $4)"
            " ON CONFLICT DO NOTHING",
            shard, event.url_key, event.version,
            event.parser_version, now, text, positions[i])
        if int(status.rsplit(" ", 1)[-1]):
            added += 1
            counted.update((shard, name) for name in payload_counter_names(event.payload))
    await _event_counts.add_counts(conn, counted)
    return added


async def _take_positions(conn: Conn, shards: Sequence[int]) -> list[int]:
    """The next position of its shard for each entry of ``shards`` (sorted by shard)."""
    counts = Counter(shards)
    lasts = {r[0]: int(r[1]) for r in await conn.fetch(
        "SELECT s, courtier_take_shard_pos(s, n) FROM (SELECT s, n FROM"
        " unnest($1::integer[], $2::integer[]) AS t(s, n) ORDER BY s) AS o",
        list(counts), list(counts.values()))}
    positions: list[int] = []
    for shard in shards:
        positions.append(lasts[shard] - counts[shard] + 1)
        counts[shard] -= 1
    return positions


async def save_segment(conn: Conn, name: str, owner: str, state: str, size: int,
                       now: float) -> None:
    if state not in SEGMENT_STATES:
        raise StoreError(f"unknown segment state {state!r}")
    await conn.execute(
        "INSERT INTO archive_segments (name, owner, state, size, created_at, updated_at)"
        " VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (name) DO UPDATE SET"
        " owner = excluded.owner, state = excluded.state, size = excluded.size,"
        " updated_at = excluded.updated_at", name, owner, state, size, now)


async def segments(conn: Conn, owner: str | None,
                   states: Collection[str]) -> list[SegmentRecord]:
    rows = await conn.fetch(
        "SELECT name, owner, state, size, created_at, updated_at FROM archive_segments"
        " WHERE ($1::text IS NULL OR owner = $1)"
        " AND (cardinality($2::text[]) = 0 OR state = ANY($2)) ORDER BY name",
        owner, list(states))
    return [SegmentRecord(r[0], r[1], r[2], int(r[3]), float(r[4]), float(r[5])) for r in rows]


async def sitemap_changed(conn: Conn, items: Sequence[tuple[bytes, float]], now: float) -> int:
    """See ``Store.sitemap_changed``: the rows made due enter the host queue at ``now``."""
    rows: list[Any] = await conn.fetch(
        "UPDATE urls u SET next_fetch_at = $4, sitemap_lastmod = i.lastmod"
        " FROM unnest($1::integer[], $2::bytea[], $3::double precision[])"
        " AS i(shard, url_key, lastmod)"
        f" WHERE u.shard = i.shard AND u.url_key = i.url_key AND u.state = {_rows.QUEUED}"
        " AND u.last_fetch_at IS NOT NULL AND u.last_fetch_at < i.lastmod"
        " AND u.next_fetch_at > $4"
        " RETURNING u.shard, u.host_key, u.next_fetch_at, u.priority",
        [key_shard(k) for k, _ in items], [k for k, _ in items], [m for _, m in items], now)
    await _queries.queue_add(conn, rows)
    return len(rows)


async def requeue_archive_file(conn: Conn, warc_file: str, now: float) -> int:
    rows: list[Any] = await conn.fetch(
        f"UPDATE urls SET state = {_rows.QUEUED}, next_fetch_at = $2, warc_file = NULL,"
        " warc_offset = NULL, warc_length = NULL, payload_digest = NULL, etag = NULL,"
        " last_modified = NULL WHERE warc_file = $1"
        " RETURNING shard, host_key, next_fetch_at, priority", warc_file, now)
    await _queries.queue_add(conn, rows)
    await conn.execute("DELETE FROM payloads WHERE warc_file = $1", warc_file)
    return len(rows)
