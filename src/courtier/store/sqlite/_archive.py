"""SQLite side of the archive Store methods: segment states, requeue of a lost WARC file,
re-parse events (migrations 0008 and 0009; the PostgreSQL side is ``postgres/_archive.py``).

Each function but :func:`reparse_rows` takes the store's connection and runs inside a
transaction opened by :class:`courtier.store.sqlite.store.SqliteStore`; none of them
commits or rolls back itself. :func:`reparse_rows` encodes the payloads before that
transaction, so a payload that is not JSON fails the call before anything is written.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from typing import Any

from courtier.core.urls import shard_of_key
from courtier.store.base import ReparseEvent, SegmentRecord
from courtier.store.event_counts import EVENTS, payload_counter_names
from courtier.store.sqlite import _event_counts, _queries, _refill
from courtier.store.sqlite._outbox_heads import take_positions

#: an events row ``(url_key, version, kind, created_at, payload)`` and the event it holds
ReparseRow = tuple[tuple[bytes, int, int, float, str], ReparseEvent]


def save_segment(conn: sqlite3.Connection, name: str, owner: str, state: str, size: int,
                 now: float) -> None:
    conn.execute(
        "INSERT INTO archive_segments (name, owner, state, size, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET"
        " owner = excluded.owner, state = excluded.state, size = excluded.size,"
        " updated_at = excluded.updated_at", (name, owner, state, size, now, now))


def segments(conn: sqlite3.Connection, owner: str | None,
             states: Sequence[str]) -> list[SegmentRecord]:
    sql = ("SELECT name, owner, state, size, created_at, updated_at"
           " FROM archive_segments WHERE 1 = 1")
    params: list[Any] = []
    if owner is not None:
        sql += " AND owner = ?"
        params.append(owner)
    if states:
        sql += f" AND state IN ({', '.join('?' * len(states))})"
        params += states
    rows = conn.execute(sql + " ORDER BY name", params).fetchall()
    return [SegmentRecord(*r) for r in rows]


def requeue_archive_file(conn: sqlite3.Connection, warc_file: str, now: float) -> int:
    """The rows whose last record is in ``warc_file`` → QUEUED at ``now``, their WARC
    location, digest and validators cleared; the file's payload index rows deleted."""
    cur = conn.execute(
        "UPDATE urls SET state = ?, next_fetch_at = ?, warc_file = NULL,"
        " warc_offset = NULL, warc_length = NULL, payload_digest = NULL, etag = NULL,"
        " last_modified = NULL WHERE warc_file = ?"
        " RETURNING shard, host_key, next_fetch_at, priority",
        (_queries.QUEUED, now, warc_file))
    changed = cur.fetchall()
    # the host queue follows the rows that are due again
    _refill.enter_queue(conn, changed)
    _refill.refresh_hosts(conn, {(int(row[0]), str(row[1])) for row in changed})
    conn.execute("DELETE FROM payloads WHERE warc_file = ?", (warc_file,))
    return len(changed)


def sitemap_changed(conn: sqlite3.Connection, items: Sequence[tuple[bytes, float]],
                    now: float) -> int:
    """See ``Store.sitemap_changed``: the rows made due enter the host queue at ``now``."""
    changed: list[tuple[int, str, float, int]] = []
    for url_key, lastmod in items:
        changed += conn.execute(
            "UPDATE urls SET next_fetch_at = ?, sitemap_lastmod = ? WHERE url_key = ?"
            " AND state = ? AND last_fetch_at IS NOT NULL AND last_fetch_at < ?"
            " AND next_fetch_at > ? RETURNING shard, host_key, next_fetch_at, priority",
            (now, lastmod, url_key, _queries.QUEUED, lastmod, now)).fetchall()
    _refill.enter_queue(conn, changed)
    return len(changed)


def reparse_rows(events: Sequence[ReparseEvent], now: float) -> list[ReparseRow]:
    """The events rows of ``events`` (those of parser version 1 or more), payloads
    encoded; StoreError when a payload is not JSON-serialisable."""
    rows: list[ReparseRow] = []
    for event in events:
        if event.parser_version < 1:
            continue
        text = event.payload_json()
        rows.append(((event.url_key, event.version, event.parser_version, now, text), event))
    return rows


def add_reparse_events(conn: sqlite3.Connection, rows: Sequence[ReparseRow]) -> int:
    """Insert the rows not stored yet (one per capture and parser version), add their
    counts to the outbox tallies; return how many were new."""
    added: Counter[str] = Counter()
    shards = [shard_of_key(event.url_key) for _, event in rows]
    positions = take_positions(conn, shards)
    for (row, event), shard, position in zip(rows, shards, positions, strict=True):
        if conn.execute(
                "INSERT OR IGNORE INTO events (url_key, version, kind, created_at,"
                " payload, shard, shard_pos) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (*row, shard, position)).rowcount:
            added.update(payload_counter_names(event.payload))
    _event_counts.add_counts(conn, added)
    return added[EVENTS]
