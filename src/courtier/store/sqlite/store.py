"""SqliteStore: the embedded :class:`~courtier.store.base.Store` (one file, WAL).

Threading model: one ``sqlite3`` connection, created, used and closed on one
dedicated worker thread (a ``ThreadPoolExecutor(max_workers=1)``). Every
public method is a coroutine that hands one job to that thread, so the event
loop never blocks on disk and writes are naturally serialised (one writer,
as SQLite wants). Concurrent callers queue in submission order.

Transactions: each method is exactly one transaction — ``BEGIN IMMEDIATE``
for methods that write, ``BEGIN`` (a consistent read snapshot) for those
that only read — committed at the end and rolled back on any error.
``sqlite3.Error`` and ``OSError`` (disk full, I/O error, corrupt file,
unwritable path) are raised as :class:`~courtier.errors.StoreError` naming
the file and the operation; nothing of a failed call is applied.

Durability: WAL with ``synchronous=NORMAL`` by default — an acknowledged write
survives a process crash (kill -9); the last transactions may be lost on power
failure or an OS crash, which at-least-once fetching tolerates.
``durability="full"`` sets ``synchronous=FULL``: every commit is fsynced.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from courtier.clock import Clock, RealClock
from courtier.errors import StoreError
from courtier.store.base import (
    SEGMENT_STATES,
    CommitResult,
    DayCount,
    DueUrl,
    Event,
    FetchCommit,
    HostRecord,
    HostStatsDelta,
    HostTierRecord,
    NewUrl,
    PayloadLocation,
    ReparseEvent,
    SegmentRecord,
)
from courtier.store.event_counts import EVENTS, EventCounts, payload_counter_names
from courtier.store.sqlite import (
    _cluster,
    _commit,
    _event_counts,
    _plans,
    _queries,
    _refill,
    _schema,
)
from courtier.urls import shard_of_key

T = TypeVar("T")


def _describe(exc: BaseException) -> str:
    """A hint for the common failure classes, appended to the error message."""
    text = str(exc).lower()
    if "full" in text or getattr(exc, "errno", None) == 28:
        return " (the disk or database is full: free space, or move --data elsewhere)"
    if "not a database" in text or "malformed" in text:
        return " (the file is not a courtier database or is corrupted)"
    if "unable to open" in text or isinstance(exc, PermissionError | NotADirectoryError):
        return " (check that the folder exists and is writable)"
    if "locked" in text or "busy" in text:
        return " (another process holds the database lock for too long)"
    return ""


class SqliteStore(_cluster.SqliteCluster):
    """A :class:`courtier.store.base.Store` in one SQLite file.

    ``path`` is the database file (created with its folder on :meth:`open`);
    ``":memory:"`` gives a private in-memory store. ``clock`` stamps event
    ``created_at`` and host ``updated_at`` (default: :class:`RealClock`).
    Call :meth:`open` before anything else; methods of a store that is not
    open raise :class:`StoreError`.
    """

    def __init__(self, path: str | Path, clock: Clock | None = None,
                 durability: str = "normal") -> None:
        if durability not in _schema.SYNCHRONOUS:
            raise StoreError(f"unknown SQLite durability {durability!r} (normal or full)")
        self._durability = durability
        self._path = str(path)
        self._clock: Clock = clock if clock is not None else RealClock()
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._schema_version = 0

    @property
    def path(self) -> str:
        return self._path

    @property
    def schema_version(self) -> int:
        """The schema version after :meth:`open` (0 before)."""
        return self._schema_version

    # -- plumbing ---------------------------------------------------------

    async def _submit(self, op: str, fn: Callable[[], T]) -> T:
        executor = self._executor
        if executor is None or self._closed:
            raise StoreError(f"SQLite store {self._path}: {op} called on a store that is not open")
        loop = asyncio.get_running_loop()

        def guarded() -> T:
            try:
                return fn()
            except StoreError:
                raise
            except (sqlite3.Error, OSError) as exc:
                raise StoreError(
                    f"SQLite store {self._path}: {op} failed: {exc}{_describe(exc)}"
                ) from exc

        return await loop.run_in_executor(executor, guarded)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"SQLite store {self._path} is not open")
        return self._conn

    async def _tx(self, op: str, fn: Callable[[sqlite3.Connection], T], write: bool = True) -> T:
        """Run ``fn(conn)`` in one transaction on the worker thread."""

        def job() -> T:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = fn(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return result

        return await self._submit(op, job)

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on the worker thread outside any transaction (tests, tools)."""
        return await self._submit("call", lambda: fn(self._connection()))

    # -- life cycle -------------------------------------------------------

    async def open(self) -> None:
        """Connect, set the PRAGMAs and apply pending migrations. Idempotent."""
        if self._conn is not None:
            return
        if self._closed:
            raise StoreError(f"SQLite store {self._path} was closed; create a new SqliteStore")
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="courtier-sqlite")

        def job() -> int:
            conn = _schema.connect(self._path, self._durability)
            try:
                version = _schema.migrate(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
            return version

        try:
            self._schema_version = await self._submit("open", job)
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise

    async def close(self) -> None:
        """Close the connection (SQLite checkpoints the WAL) and stop the thread. Idempotent."""
        executor = self._executor
        if executor is None or self._closed:
            self._closed = True
            return

        def job() -> None:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()

        try:
            await self._submit("close", job)
        finally:
            self._closed = True
            self._executor = None
            executor.shutdown(wait=False)

    # -- URLs ---------------------------------------------------------------

    async def add_urls(self, urls: Sequence[NewUrl]) -> int:
        if not urls:
            return 0
        batch = list(urls)
        return await self._tx("add_urls", lambda conn: _queries.insert_urls(conn, batch))

    async def load_due(
        self,
        shards: Sequence[int],
        now: float,
        limit: int,
        per_host_limit: int,
        skip_hosts: Collection[str] = (),
        epochs: Mapping[int, int] | None = None,
    ) -> list[DueUrl]:
        shard_list, skip = list(shards), list(skip_hosts)
        fence = None if epochs is None else dict(epochs)

        def job(conn: sqlite3.Connection) -> list[DueUrl]:
            allowed = None if fence is None else _cluster.fenced_shards(conn, fence)
            wanted = [s for s in shard_list if allowed is None or s in allowed]
            return _refill.load_due(conn, wanted, now, limit, per_host_limit, skip)

        return await self._tx("load_due", job)

    async def reset_scheduled(self, shards: Sequence[int],
                              epochs: Mapping[int, int] | None = None) -> int:
        shard_list = list(shards)
        fence = None if epochs is None else dict(epochs)

        def job(conn: sqlite3.Connection) -> int:
            allowed = None if fence is None else _cluster.fenced_shards(conn, fence)
            wanted = [s for s in shard_list if allowed is None or s in allowed]
            return _queries.reset_scheduled(conn, wanted)

        return await self._tx("reset_scheduled", job)

    async def release(self, items: Sequence[tuple[bytes, float]],
                      epochs: Mapping[int, int] | None = None) -> int:
        """SCHEDULED rows given back unfetched → QUEUED at the given time (no version bump).

        Rows that are not SCHEDULED (already committed, retired, requeued) are
        left alone and not counted.
        """
        if not items:
            return 0
        batch = list(items)
        fence = None if epochs is None else dict(epochs)

        def job(conn: sqlite3.Connection) -> int:
            if fence is None:
                return _queries.release(conn, batch)
            allowed = _cluster.fenced_shards(conn, fence)
            return _queries.release(conn, [(k, at) for k, at in batch
                                           if shard_of_key(k) in allowed])

        return await self._tx("release", job)

    async def seed_urls(self, limit: int = 100_000) -> list[str]:
        """URLs at depth 0 (seeds of every run so far), oldest first, at most ``limit``."""
        return await self._tx(
            "seed_urls", lambda conn: _queries.seed_urls(conn, limit), write=False
        )

    async def next_due_at(self, shards: Sequence[int], pending_only: bool = False) -> float | None:
        shard_list = list(shards)
        return await self._tx(
            "next_due_at",
            lambda conn: _queries.next_due_at(conn, shard_list, pending_only),
            write=False,
        )

    async def pending_counts(self, shards: Sequence[int]) -> tuple[int, int]:
        shard_list = list(shards)
        return await self._tx(
            "pending_counts",
            lambda conn: _queries.pending_counts(conn, shard_list),
            write=False,
        )

    async def commit(
        self, commits: Sequence[FetchCommit], host_stats: Sequence[HostStatsDelta] = ()
    ) -> CommitResult:
        if not commits and not host_stats:
            return CommitResult(applied=0, stale=0, new_urls=0)
        batch, stats, now = list(commits), list(host_stats), self._clock.now()
        return await self._tx("commit", lambda conn: _commit.apply_commits(conn, batch, stats, now))

    async def get_url(self, url_key: bytes) -> dict[str, Any] | None:
        def job(conn: sqlite3.Connection) -> dict[str, Any] | None:
            cur = conn.execute("SELECT * FROM urls WHERE url_key = ?", (url_key,))
            row = cur.fetchone()
            if row is None:
                return None
            result = {d[0]: value for d, value in zip(cur.description, row, strict=True)}
            result["url_key"] = bytes(result["url_key"])
            result["url_key_hex"] = result["url_key"].hex()
            return result

        return await self._tx("get_url", job, write=False)

    # -- hosts ------------------------------------------------------------------

    async def load_host(self, host_key: str) -> HostRecord | None:
        return await self._tx(
            "load_host", lambda conn: _queries.load_host(conn, host_key), write=False
        )

    async def save_robots(self, record: HostRecord) -> None:
        now = self._clock.now()
        await self._tx("save_robots", lambda conn: _queries.save_robots(conn, record, now))

    async def set_policy(
        self,
        host_key: str,
        shard: int,
        delay: float | None,
        max_in_flight: int | None,
        max_pages: int | None,
        blocked: bool,
    ) -> None:
        policy, now = (delay, max_in_flight, max_pages, blocked), self._clock.now()
        await self._tx(
            "set_policy", lambda conn: _queries.set_policy(conn, host_key, shard, policy, now)
        )

    # -- payloads, events, figures ----------------------------------------------

    async def save_backoff(self, host_key: str, shard: int, until: float) -> None:
        now = self._clock.now()
        await self._tx(
            "save_backoff", lambda conn: _queries.save_backoff(conn, host_key, shard, until, now)
        )

    async def load_day_counts(self, keys: Collection[str]) -> dict[str, DayCount]:
        wanted = list(keys)
        if not wanted:
            return {}
        return await self._tx(
            "load_day_counts", lambda conn: _queries.load_day_counts(conn, wanted), write=False
        )

    async def due_within(self, shards: Sequence[int], until: float) -> int:
        shard_list = list(shards)
        return await self._tx(
            "due_within", lambda conn: _queries.due_within(conn, shard_list, until), write=False
        )

    async def set_values(self, items: Sequence[tuple[bytes, float | None]]) -> int:
        rows = list(items)
        return await self._tx("set_values", lambda conn: _plans.set_values(conn, rows))

    async def url_values(self, url_keys: Collection[bytes]) -> dict[bytes, float]:
        keys = list(url_keys)
        return await self._tx("url_values", lambda conn: _plans.url_values(conn, keys),
                              write=False)

    async def set_host_tier(self, record: HostTierRecord) -> None:
        now = self._clock.now()
        await self._tx("set_host_tier", lambda conn: _plans.set_host_tier(conn, record, now))

    async def host_tiers(self, host_keys: Collection[str]) -> dict[str, HostTierRecord]:
        keys = list(host_keys)
        return await self._tx("host_tiers", lambda conn: _plans.host_tiers(conn, keys),
                              write=False)

    async def tier_counts(self, shards: Sequence[int], until: float) -> dict[str, int]:
        shard_list = list(shards)
        return await self._tx(
            "tier_counts", lambda conn: _plans.tier_counts(conn, shard_list, until), write=False)

    async def policies_changed(self, since: float) -> list[HostRecord]:
        return await self._tx(
            "policies_changed", lambda conn: _queries.policies_changed(conn, since), write=False
        )

    async def fetch_log(
        self, after: int = 0, limit: int = 1000, url_key: bytes | None = None
    ) -> list[dict[str, Any]]:
        return await self._tx(
            "fetch_log", lambda conn: _queries.fetch_log(conn, after, limit, url_key), write=False
        )

    async def payload_location(self, digest: str) -> PayloadLocation | None:
        return (await self.payload_locations([digest])).get(digest)

    async def payload_locations(self, digests: Sequence[str]) -> dict[str, PayloadLocation]:
        wanted = list(digests)
        if not wanted:
            return {}
        return await self._tx("payload_locations",
                              lambda conn: _queries.payload_locations(conn, wanted), write=False)

    async def save_segment(self, name: str, owner: str, state: str, size: int) -> None:
        if state not in SEGMENT_STATES:
            raise StoreError(f"unknown segment state {state!r}")
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO archive_segments (name, owner, state, size, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET"
                " owner = excluded.owner, state = excluded.state, size = excluded.size,"
                " updated_at = excluded.updated_at", (name, owner, state, size, now, now))

        await self._tx("save_segment", job)

    async def segments(self, owner: str | None = None,
                       states: Collection[str] = ()) -> list[SegmentRecord]:
        wanted = list(states)

        def job(conn: sqlite3.Connection) -> list[SegmentRecord]:
            sql = ("SELECT name, owner, state, size, created_at, updated_at"
                   " FROM archive_segments WHERE 1 = 1")
            params: list[Any] = []
            if owner is not None:
                sql += " AND owner = ?"
                params.append(owner)
            if wanted:
                sql += f" AND state IN ({', '.join('?' * len(wanted))})"
                params += wanted
            rows = conn.execute(sql + " ORDER BY name", params).fetchall()
            return [SegmentRecord(*r) for r in rows]

        return await self._tx("segments", job, write=False)

    async def requeue_archive_file(self, warc_file: str, now: float) -> int:
        def job(conn: sqlite3.Connection) -> int:
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

        return await self._tx("requeue_archive_file", job)

    async def add_reparse_events(self, events: Sequence[ReparseEvent]) -> int:
        now = self._clock.now()
        rows, kept = [], []
        for event in events:
            if event.parser_version < 1:
                continue
            try:
                text = json.dumps(event.payload, separators=(",", ":"), allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise StoreError(f"reparse event payload is not JSON-serialisable: {exc}") \
                    from exc
            rows.append((event.url_key, event.version, event.parser_version, now, text))
            kept.append(event)

        def job(conn: sqlite3.Connection) -> int:
            added: Counter[str] = Counter()
            for row, event in zip(rows, kept, strict=True):
                if conn.execute(
                        "INSERT OR IGNORE INTO events (url_key, version, kind, created_at,"
                        " payload) VALUES (?, ?, ?, ?, ?)", row).rowcount:
                    added.update(payload_counter_names(event.payload))
            _event_counts.add_counts(conn, added)
            return added[EVENTS]

        return await self._tx("add_reparse_events", job)

    async def read_events(self, after: int, limit: int) -> list[Event]:
        def job(conn: sqlite3.Connection) -> list[Event]:
            rows = conn.execute(
                "SELECT id, url_key, version, created_at, payload FROM events"
                " WHERE id > ? ORDER BY id LIMIT ?",
                (after, max(0, limit)),
            ).fetchall()
            return [Event(r[0], bytes(r[1]), r[2], r[3], json.loads(r[4])) for r in rows]

        return await self._tx("read_events", job, write=False)

    async def event_counts(self) -> EventCounts:
        return await self._tx("event_counts", _event_counts.read_counts, write=False)

    async def counts(self) -> dict[str, int]:
        """urls, queued, scheduled, retired, fetched (last_fetch_at set), events, hosts.

        ``hosts`` counts rows of the hosts table (hosts with robots, policy or
        counters stored). The URL figures take one scan of ``urls``.
        """

        def job(conn: sqlite3.Connection) -> dict[str, int]:
            row = conn.execute(
                "SELECT COUNT(*), TOTAL(state = ?), TOTAL(state = ?), TOTAL(state = ?),"
                " COUNT(last_fetch_at) FROM urls",
                (_queries.QUEUED, _queries.SCHEDULED, _queries.RETIRED),
            ).fetchone()
            events = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
            hosts = conn.execute("SELECT COUNT(*) FROM hosts").fetchone()[0]
            names = ("urls", "queued", "scheduled", "retired", "fetched")
            figures = {name: int(value) for name, value in zip(names, row, strict=True)}
            return {**figures, "events": int(events), "hosts": int(hosts)}

        return await self._tx("counts", job, write=False)
