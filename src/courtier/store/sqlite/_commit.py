"""The commit transaction of the SQLite store: fenced, versioned, exactly once.

:func:`apply_commits` runs inside the ``BEGIN IMMEDIATE`` transaction opened
by the store, so the rows it reads cannot change before it writes. It

1. reads the current shard epochs and the (version, state, shard) of every
   URL row the batch touches;
2. decides in Python which commits apply: the row exists, is QUEUED or
   SCHEDULED (never RETIRED), has ``version == commit.version``, and its
   shard's epoch equals ``commit.epoch`` (a shard without a row is epoch 0).
   A second commit of the same lease in one batch is stale, like a repeat;
3. writes the applied ones with ``executemany`` and the same conditions in
   the ``WHERE`` clause (if the counts disagree it raises and the whole
   transaction is rolled back): URL rows, events ``(url_key, version + 1)``,
   fetch_log audit rows, the payload index;
4. inserts every commit's ``new_urls`` (applied or stale: discovery is
   idempotent) and applies host counters.

Field rules for an applied commit: the content fields (etag, last_modified,
content_type, payload_digest, content_length, title, WARC location) are
replaced when the outcome is ``ok``; for any other outcome (a 304, a retry…)
a None keeps the stored value, so validators survive a revisit or an error.
Every other field is written as given.

Host counters: a :class:`HostStatsDelta` is skipped when the batch holds
commits for its host and none of them applied (a replayed batch must not
count twice); deltas of hosts without commits in the batch always apply.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any

from courtier.core.errors import StoreError
from courtier.core.outcome import Outcome
from courtier.dedup.fingerprint64 import to_signed64
from courtier.store.base import CommitResult, FetchCommit, HostStatsDelta
from courtier.store.event_counts import counter_names, tally
from courtier.store.sqlite._event_counts import add_counts, recount
from courtier.store.sqlite._outbox_heads import take_positions
from courtier.store.sqlite._queries import QUEUED, RETIRED, SCHEDULED, as_json_list, insert_urls
from courtier.store.sqlite._refill import enter_queue, refresh_levels

_CHUNK = 500  # bound variables per IN (...) lookup, far below SQLite's limit

_CONTENT = (
    "etag", "last_modified", "content_type", "payload_digest", "content_length", "title",
    "simhash", "near_dup_of",
)
_LOCATION = ("warc_file", "warc_offset", "warc_length")
_KEEP_IF_NONE = ", ".join(
    f"{c} = CASE WHEN :fresh THEN :{c} ELSE COALESCE(:{c}, {c}) END" for c in _CONTENT + _LOCATION
)
_UPDATE_URL = (
    "UPDATE urls SET version = version + 1, state = :state, last_fetch_at = :fetched_at,"
    " next_fetch_at = :next_fetch_at, interval = :interval, status = :status,"
    " outcome = :outcome, failure_count = :failure_count, redirect_to = :redirect_to,"
    " error_kind = :error_kind, robots_digest = :robots_digest,"
    " change_stats = COALESCE(:change_stats, change_stats),"
    " priority = COALESCE(:priority, priority),"
    " value = COALESCE(:value, value), tier = COALESCE(:tier, tier),"
    f" delay_applied = :delay_applied, {_KEEP_IF_NONE}"
    f" WHERE url_key = :url_key AND version = :version AND state IN ({QUEUED}, {SCHEDULED})"
)
_INSERT_EVENT = (
    "INSERT OR IGNORE INTO events (url_key, version, created_at, payload, shard, shard_pos)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
_INSERT_LOG = (
    "INSERT INTO fetch_log (url_key, version, fetched_at, status, outcome, robots_digest,"
    " delay_applied, error_kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_PAYLOAD = (
    "INSERT OR IGNORE INTO payloads (digest, warc_file, warc_offset, url, fetched_at)"
    " VALUES (?, ?, ?, ?, ?)"
)
_COUNTERS = (
    "fetched",
    "errors",
    "bytes",
    "ttfb_sum",
    "status_2xx",
    "status_3xx",
    "status_4xx",
    "status_5xx",
)
_UPSERT_HOST = (
    f"INSERT INTO hosts (host_key, shard, {', '.join(_COUNTERS)}, updated_at)"
    f" VALUES (?, ?, {', '.join('?' for _ in _COUNTERS)}, ?)"
    " ON CONFLICT (host_key) DO UPDATE SET "
    + ", ".join(f"{c} = {c} + excluded.{c}" for c in _COUNTERS)
    + ", updated_at = excluded.updated_at"
)


def _chunks(items: Sequence[bytes]) -> Iterator[Sequence[bytes]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _current_rows(
    conn: sqlite3.Connection, keys: Sequence[bytes]
) -> dict[bytes, tuple[int, int, int, int]]:
    """url_key → (version, state, shard, priority) for the keys that exist."""
    found: dict[bytes, tuple[int, int, int, int]] = {}
    for chunk in _chunks(keys):
        marks = ", ".join("?" for _ in chunk)
        for key, version, state, shard, priority in conn.execute(
            "SELECT url_key, version, state, shard, priority FROM urls"
            f" WHERE url_key IN ({marks})",
            chunk,
        ):
            found[bytes(key)] = (version, state, shard, priority)
    return found


def _epochs(conn: sqlite3.Connection, shards: set[int]) -> dict[int, int]:
    rows = conn.execute(
        "SELECT shard, epoch FROM shards WHERE shard IN (SELECT value FROM json_each(?))",
        (as_json_list(shards),),
    )
    return {int(shard): int(epoch) for shard, epoch in rows}


class _QueueChanges:
    """What the applied commits do to host_queue (see :mod:`._refill`)."""

    def __init__(self) -> None:
        self.entered: list[tuple[int, str, float, int]] = []  # rows now QUEUED
        #: (shard, host, level) of rows that were QUEUED: the row left that level
        self.changed: set[tuple[int, str, int]] = set()


def _select_applicable(
    conn: sqlite3.Connection, commits: Sequence[FetchCommit]
) -> tuple[list[FetchCommit], int, _QueueChanges]:
    """Split the batch into commits that apply (in order) and a stale count, and
    note how host_queue must follow."""
    rows = _current_rows(conn, list(dict.fromkeys(c.url_key for c in commits)))
    epochs = _epochs(conn, {row[2] for row in rows.values()})
    applicable: list[FetchCommit] = []
    stale = 0
    queue = _QueueChanges()
    for c in commits:
        row = rows.get(c.url_key)
        if (
            row is None
            or row[0] != c.version
            or row[1] not in (QUEUED, SCHEDULED)
            or epochs.get(row[2], 0) != c.epoch
        ):
            stale += 1
            continue
        applicable.append(c)
        priority = row[3] if c.priority is None else c.priority
        if row[1] == QUEUED:  # read without marking (the refill): one seek of its level
            queue.changed.add((row[2], c.host_key, row[3]))
        if c.next_fetch_at is not None:
            queue.entered.append((row[2], c.host_key, c.next_fetch_at, priority))
        state = RETIRED if c.next_fetch_at is None else QUEUED
        rows[c.url_key] = (c.version + 1, state, row[2], priority)
    return applicable, stale, queue


def _update_params(c: FetchCommit) -> dict[str, Any]:
    return {
        "url_key": c.url_key,
        "version": c.version,
        "state": RETIRED if c.next_fetch_at is None else QUEUED,
        "fetched_at": c.fetched_at,
        "next_fetch_at": c.next_fetch_at,
        "interval": c.interval,
        "status": c.status,
        "outcome": str(c.outcome),
        "failure_count": c.failure_count,
        "redirect_to": c.redirect_to,
        "error_kind": c.error_kind,
        "robots_digest": c.robots_digest,
        "delay_applied": c.delay_applied,
        "fresh": 1 if c.outcome == Outcome.OK else 0,
        "change_stats": c.change_stats,
        "priority": c.priority,
        "value": c.value,
        "tier": c.tier,
        **{name: getattr(c, name) for name in _CONTENT + _LOCATION},
        "simhash": None if c.simhash is None else to_signed64(c.simhash),
    }


def apply_commits(
    conn: sqlite3.Connection,
    commits: Sequence[FetchCommit],
    host_stats: Sequence[HostStatsDelta],
    now: float,
) -> CommitResult:
    """Write one batch of fetch results; see the module docstring for the rules."""
    applicable, stale, queue = _select_applicable(conn, commits)
    if applicable:
        positions = take_positions(conn, [c.shard for c in applicable])
        events = [(c.url_key, c.version + 1, now, c.event_json(), c.shard, pos)
                  for c, pos in zip(applicable, positions, strict=True)]
        cur = conn.executemany(_UPDATE_URL, [_update_params(c) for c in applicable])
        if cur.rowcount != len(applicable):
            raise StoreError(
                f"commit batch changed {cur.rowcount} URL rows, expected {len(applicable)};"
                " rolled back"
            )
        inserted = conn.executemany(_INSERT_EVENT, events).rowcount
        if inserted == len(events):
            add_counts(conn, tally(counter_names(c.outcome, c.event.get("status"))
                                   for c in applicable))
        else:  # some already there: count what the outbox now holds
            recount(conn)
        conn.executemany(
            _INSERT_LOG,
            [
                (
                    c.url_key,
                    c.version + 1,
                    c.fetched_at,
                    c.status,
                    str(c.outcome),
                    c.robots_digest,
                    c.delay_applied,
                    c.error_kind,
                )
                for c in applicable
            ],
        )
        conn.executemany(
            _INSERT_PAYLOAD,
            [
                (c.payload_digest, c.warc_file, c.warc_offset, c.url, c.fetched_at)
                for c in applicable
                if c.payload_digest and c.warc_file is not None and c.warc_offset is not None
            ],
        )
    new_urls = insert_urls(conn, list(chain.from_iterable(c.new_urls for c in commits)))
    enter_queue(conn, queue.entered)
    refresh_levels(conn, queue.changed)
    _apply_host_stats(conn, commits, applicable, host_stats, now)
    return CommitResult(applied=len(applicable), stale=stale, new_urls=new_urls)


def _apply_host_stats(
    conn: sqlite3.Connection,
    commits: Sequence[FetchCommit],
    applicable: Sequence[FetchCommit],
    host_stats: Sequence[HostStatsDelta],
    now: float,
) -> None:
    committed_hosts = {c.host_key for c in commits}
    applied_hosts = {c.host_key for c in applicable}
    rows = [
        (d.host_key, d.shard, *(getattr(d, name) for name in _COUNTERS), now)
        for d in host_stats
        if d.host_key in applied_hosts or d.host_key not in committed_hosts
    ]
    if rows:
        conn.executemany(_UPSERT_HOST, rows)
