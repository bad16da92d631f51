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

The class holds the plumbing, hosts, the refresh plan, the archive and the figures;
the URL methods (intake, refill, commit) are mixed in from ``_urls.py`` and the
cluster's from ``_cluster.py``.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from courtier.clock import Clock, RealClock
from courtier.errors import StoreError
from courtier.store.base import (
    SEGMENT_STATES,
    DayCount,
    Event,
    HostRecord,
    HostTierRecord,
    PayloadLocation,
    ReparseEvent,
    SegmentRecord,
)
from courtier.store.event_counts import EventCounts
from courtier.store.sqlite import (
    _archive,
    _cluster,
    _event_counts,
    _plans,
    _queries,
    _schema,
    _urls,
)

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


class SqliteStore(_urls.SqliteUrls, _cluster.SqliteCluster):
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

    # -- hosts (URLs: see _urls.py; cluster: _cluster.py) ------------------------

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

    async def policies_changed(self, since: float) -> list[HostRecord]:
        return await self._tx(
            "policies_changed", lambda conn: _queries.policies_changed(conn, since), write=False
        )

    # -- refresh plan (values, host tiers; see _plans.py) -----------------------

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

    # -- audit, payloads ---------------------------------------------------------

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

    # -- archive (segments, a lost WARC file, re-parse events; see _archive.py) ---

    async def save_segment(self, name: str, owner: str, state: str, size: int) -> None:
        if state not in SEGMENT_STATES:
            raise StoreError(f"unknown segment state {state!r}")
        now = self._clock.now()
        await self._tx("save_segment",
                       lambda conn: _archive.save_segment(conn, name, owner, state, size, now))

    async def segments(self, owner: str | None = None,
                       states: Collection[str] = ()) -> list[SegmentRecord]:
        wanted = list(states)
        return await self._tx("segments", lambda conn: _archive.segments(conn, owner, wanted),
                              write=False)

    async def requeue_archive_file(self, warc_file: str, now: float) -> int:
        return await self._tx("requeue_archive_file",
                              lambda conn: _archive.requeue_archive_file(conn, warc_file, now))

    async def add_reparse_events(self, events: Sequence[ReparseEvent]) -> int:
        rows = _archive.reparse_rows(events, self._clock.now())
        return await self._tx("add_reparse_events",
                              lambda conn: _archive.add_reparse_events(conn, rows))

    # -- outbox and figures -------------------------------------------------------

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
