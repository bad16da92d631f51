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
unwritable path) are raised as :class:`~courtier.core.errors.StoreError` naming
the file and the operation; nothing of a failed call is applied.

Durability: WAL with ``synchronous=NORMAL`` by default — an acknowledged write
survives a process crash (kill -9); the last transactions may be lost on power
failure or an OS crash, which at-least-once fetching tolerates.
``durability="full"`` sets ``synchronous=FULL``: every commit is fsynced.

One class holds the state (the connection, its thread, the clock, the schema version)
and every method of the contract, each one transaction through :meth:`SqliteStore._tx`;
the transaction bodies that are more than a statement or two are functions taking the
connection in the private modules: ``_queries`` (intake, hosts, hand-backs, figures),
``_refill`` (``load_due``), ``_commit``, ``_plans`` (the refresh plan), ``_archive``,
``_event_counts`` and ``_cluster`` (epoch fencing and the cluster's read-decide-writes).

A URL call given shard ``epochs`` is fenced: it acts only on the shards whose stored
epoch is still the given one (:func:`~courtier.store.sqlite._cluster.fenced_shards`),
in the same transaction. The cluster: several processes may share one SQLite file on
one machine; every write runs in one ``BEGIN IMMEDIATE`` transaction, which takes the
database's write lock before reading, so a read-decide-write (an acquisition, a
day-count grant, an IP slot) is atomic across processes as well as across coroutines.
Times are the caller's ``now`` (one machine: one wall clock); :meth:`store_now` is the
store's clock.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import astuple
from pathlib import Path
from typing import Any, TypeVar

from courtier.core.clock import Clock, RealClock
from courtier.core.errors import StoreError
from courtier.core.urls import shard_of_key
from courtier.dedup.fingerprint64 import from_signed64
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
    ShardCursor,
    ShardPage,
)
from courtier.store.cluster import (
    ClusterView,
    DayGrant,
    DayReservation,
    HostClock,
    IpGrant,
    ScopeRule,
    TrapStats,
)
from courtier.store.cluster_rules import check_scope_kinds
from courtier.store.event_counts import EventCounts
from courtier.store.sqlite import (
    _archive,
    _cluster,
    _commit,
    _event_counts,
    _outbox_heads,
    _plans,
    _queries,
    _refill,
    _retention,
    _schema,
    _shard_consumers,
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


class SqliteStore:
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

    # -- URLs: intake, refill, hand-backs, commit, one URL's row ---------------------

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
        return await self._refill("load_due", _refill.load_due, shards, now, limit,
                                  per_host_limit, skip_hosts, epochs)

    async def read_due(
        self,
        shards: Sequence[int],
        now: float,
        limit: int,
        per_host_limit: int,
        skip_hosts: Collection[str] = (),
        epochs: Mapping[int, int] | None = None,
    ) -> list[DueUrl]:
        """A read transaction (``BEGIN``, not ``IMMEDIATE``): it waits for no writer."""
        return await self._refill("read_due", _refill.read_due, shards, now, limit,
                                  per_host_limit, skip_hosts, epochs)

    async def _refill(self, op: str, select: _refill.Select, shards: Sequence[int],
                      now: float, limit: int, per_host_limit: int,
                      skip_hosts: Collection[str],
                      epochs: Mapping[int, int] | None) -> list[DueUrl]:
        shard_list, skip = list(shards), list(skip_hosts)
        fence = None if epochs is None else dict(epochs)

        def job(conn: sqlite3.Connection) -> list[DueUrl]:
            allowed = None if fence is None else _cluster.fenced_shards(conn, fence)
            wanted = [s for s in shard_list if allowed is None or s in allowed]
            return select(conn, wanted, now, limit, per_host_limit, skip)

        return await self._tx(op, job, write=select is _refill.load_due)

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

    async def postpone(self, items: Sequence[tuple[bytes, int, float]],
                       epochs: Mapping[int, int] | None = None) -> int:
        """QUEUED rows given back unfetched, still at their version → due at the given
        time (no version bump); other rows are left alone and not counted."""
        if not items:
            return 0
        batch = list(items)
        fence = None if epochs is None else dict(epochs)

        def job(conn: sqlite3.Connection) -> int:
            if fence is None:
                return _queries.postpone(conn, batch)
            allowed = _cluster.fenced_shards(conn, fence)
            return _queries.postpone(conn, [item for item in batch
                                            if shard_of_key(item[0]) in allowed])

        return await self._tx("postpone", job)

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

    async def due_within(self, shards: Sequence[int], until: float) -> int:
        shard_list = list(shards)
        return await self._tx(
            "due_within", lambda conn: _queries.due_within(conn, shard_list, until), write=False
        )

    # -- cluster: workers, shard leases, shared budgets (contract: store/cluster.py) -

    async def store_now(self) -> float:
        return self._clock.now()

    async def heartbeat(self, worker_id: str, weight: float, info: Mapping[str, Any],
                        now: float, lease_seconds: float | None = None) -> float:
        text = json.dumps(dict(info), separators=(",", ":"))

        def job(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO workers (worker_id, weight, heartbeat_at, started_at, info)"
                " VALUES (?1, ?2, ?3, ?3, ?4) ON CONFLICT (worker_id) DO UPDATE SET"
                " weight = ?2, heartbeat_at = ?3, info = ?4", (worker_id, weight, now, text))
            if lease_seconds is not None:
                _cluster.renew(conn, worker_id, now, lease_seconds)

        await self._tx("heartbeat", job)
        return now

    async def leave(self, worker_id: str) -> None:
        await self._tx("leave", lambda conn: conn.execute(
            "DELETE FROM workers WHERE worker_id = ?", (worker_id,)))

    async def prune_workers(self, max_age: float, now: float) -> list[str]:
        return await self._tx("prune_workers",
                              lambda conn: _cluster.prune(conn, now - max_age, now))

    async def cluster_view(self, shards: Collection[int] | None = None) -> ClusterView:
        now = self._clock.now()
        return await self._tx("cluster_view", lambda conn: _cluster.view(conn, shards, now),
                              write=False)

    async def acquire_shards(self, owner: str, shards: Sequence[int], now: float,
                             lease_seconds: float) -> dict[int, int]:
        wanted = list(shards)
        if not wanted:
            return {}
        return await self._tx("acquire_shards", lambda conn: _cluster.acquire(
            conn, owner, wanted, now, lease_seconds))

    async def renew_shards(self, owner: str, epochs: dict[int, int], now: float,
                           lease_seconds: float) -> set[int]:
        held = dict(epochs)
        if not held:
            return set()

        def job(conn: sqlite3.Connection) -> set[int]:
            return _cluster.renew_held(conn, owner, held, now, lease_seconds)

        return await self._tx("renew_shards", job)

    async def release_shards(self, owner: str, shards: Sequence[int],
                             epochs: Mapping[int, int] | None = None) -> None:
        wanted, fence = list(shards), None if epochs is None else dict(epochs)
        await self._tx("release_shards", lambda conn: _cluster.release(conn, owner, wanted, fence))

    async def reserve_day_counts(self, reservations: Sequence[DayReservation]
                                 ) -> dict[str, DayGrant]:
        asks = list(reservations)
        if not asks:
            return {}
        return await self._tx("reserve_day_counts", lambda conn: _cluster.reserve(conn, asks))

    async def save_host_clocks(self, clocks: Sequence[HostClock]) -> None:
        now = self._clock.now()
        rows = [(*astuple(c)[:-1], now) for c in clocks]
        if not rows:
            return
        columns = _cluster.CLOCK_COLUMNS
        marks = ", ".join("?" * len(columns))
        await self._tx("save_host_clocks", lambda conn: conn.executemany(
            f"INSERT OR REPLACE INTO host_clocks ({', '.join(columns)}) VALUES ({marks})",
            rows))

    async def load_host_clocks(self, host_keys: Collection[str]) -> dict[str, HostClock]:
        keys = list(host_keys)

        def job(conn: sqlite3.Connection) -> dict[str, HostClock]:
            rows = conn.execute(
                f"SELECT {', '.join(_cluster.CLOCK_COLUMNS)} FROM host_clocks"
                " WHERE host_key IN (SELECT value FROM json_each(?))", (json.dumps(keys),))
            return {row[0]: HostClock(*row) for row in rows}

        return await self._tx("load_host_clocks", job, write=False) if keys else {}

    async def save_trap_stats(self, stats: Sequence[TrapStats]) -> None:
        now = self._clock.now()
        rows = [(s.host_key, s.shard, bytes(s.data), now) for s in stats]
        if not rows:
            return
        await self._tx("save_trap_stats", lambda conn: conn.executemany(
            "INSERT OR REPLACE INTO trap_stats (host_key, shard, data, saved_at)"
            " VALUES (?, ?, ?, ?)", rows))

    async def load_trap_stats(self, host_keys: Collection[str]) -> dict[str, TrapStats]:
        keys = list(host_keys)

        def job(conn: sqlite3.Connection) -> dict[str, TrapStats]:
            rows = conn.execute(
                "SELECT host_key, shard, data, saved_at FROM trap_stats"
                " WHERE host_key IN (SELECT value FROM json_each(?))", (json.dumps(keys),))
            return {r[0]: TrapStats(r[0], r[1], bytes(r[2]), r[3]) for r in rows}

        return await self._tx("load_trap_stats", job, write=False) if keys else {}

    async def load_simhashes(self, shards: Collection[int], limit_per_shard: int
                             ) -> dict[int, list[tuple[bytes, int]]]:
        wanted = sorted(set(shards))

        def job(conn: sqlite3.Connection) -> dict[int, list[tuple[bytes, int]]]:
            out: dict[int, list[tuple[bytes, int]]] = {}
            for shard in wanted:
                rows = conn.execute(_cluster.RECENT_SIMHASHES, (shard, limit_per_shard)).fetchall()
                if rows:
                    out[shard] = [(bytes(k), from_signed64(fp)) for k, fp in rows]
            return out

        if not wanted or limit_per_shard <= 0:
            return {}
        return await self._tx("load_simhashes", job, write=False)

    async def url_keys(self, shards: Sequence[int], after: bytes, limit: int) -> bytes:
        wanted = sorted(set(shards))
        if not wanted or limit <= 0:
            return b""

        def job(conn: sqlite3.Connection) -> bytes:
            # the primary key is url_key, whose leading bits are the shard: a range scan
            # from ``after`` that skips the rows of other shards
            rows = conn.execute(
                "SELECT url_key FROM urls WHERE url_key > ? AND shard IN "
                f"({', '.join('?' * len(wanted))}) ORDER BY url_key LIMIT ?",
                (after, *wanted, limit)).fetchall()
            return b"".join(bytes(r[0]) for r in rows)

        return await self._tx("url_keys", job, write=False)

    async def acquire_ip_slot(self, ip: str, owner: str, max_concurrent: int,
                              min_gap: float, ttl: float, now: float) -> IpGrant:
        return await self._tx("acquire_ip_slot", lambda conn: _cluster.acquire_ip(
            conn, ip, owner, max_concurrent, min_gap, ttl, now))

    async def release_ip_slot(self, ip: str, token: int) -> None:
        await self._tx("release_ip_slot", lambda conn: conn.execute(
            "DELETE FROM ip_slots WHERE ip = ? AND token = ?", (ip, token)))

    async def release_ip_slots_of(self, owner: str) -> int:
        return int(await self._tx("release_ip_slots_of", lambda conn: conn.execute(
            "DELETE FROM ip_slots WHERE owner = ?", (owner,)).rowcount))

    async def add_scope_rules(self, rules: Sequence[ScopeRule]) -> int:
        check_scope_kinds(rules)
        batch, now = list(rules), self._clock.now()
        return await self._tx("add_scope_rules", lambda conn: _cluster.add_rules(conn, batch, now))

    async def scope_rules(self, after: int = 0) -> list[ScopeRule]:
        def job(conn: sqlite3.Connection) -> list[ScopeRule]:
            return [ScopeRule(kind, value, rid) for rid, kind, value in conn.execute(
                "SELECT id, kind, value FROM scope_rules WHERE id > ? ORDER BY id", (after,))]

        return await self._tx("scope_rules", job, write=False)

    # -- hosts -----------------------------------------------------------------------

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

    async def save_https_upgrade(self, host_key: str, shard: int,
                                 https_host_key: str | None) -> None:
        now = self._clock.now()
        await self._tx("save_https_upgrade", lambda conn: _queries.save_https_upgrade(
            conn, host_key, shard, https_host_key, now))

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

    async def sitemap_changed(self, items: Sequence[tuple[bytes, float]], now: float) -> int:
        rows = list(items)
        if not rows:
            return 0
        return await self._tx("sitemap_changed",
                              lambda conn: _archive.sitemap_changed(conn, rows, now))

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
            _retention.check_readable(conn, after)
            rows = conn.execute(
                "SELECT id, url_key, version, created_at, payload FROM events"
                " WHERE id > ? ORDER BY id LIMIT ?",
                (after, max(0, limit)),
            ).fetchall()
            return [Event(r[0], bytes(r[1]), r[2], r[3], json.loads(r[4])) for r in rows]

        return await self._tx("read_events", job, write=False)

    async def read_events_by_shard(self, cursor: ShardCursor, limit: int) -> ShardPage:
        return await self._tx("read_events_by_shard",
                              lambda conn: _outbox_heads.read_page(conn, cursor, limit),
                              write=False)

    async def shard_cursor_at(self, position: int) -> ShardCursor:
        def job(conn: sqlite3.Connection) -> ShardCursor:
            _retention.check_readable(conn, position)
            return _outbox_heads.cursor_at(conn, position)

        return await self._tx("shard_cursor_at", job, write=False)

    async def events_by_url(self, after: bytes | None, urls: int) -> list[Event]:
        def job(conn: sqlite3.Connection) -> list[Event]:
            rows = conn.execute(
                "SELECT id, url_key, version, created_at, payload, shard, shard_pos FROM events"
                " WHERE url_key IN (SELECT DISTINCT url_key FROM events WHERE url_key > ?"
                " ORDER BY url_key LIMIT ?) ORDER BY url_key, id",
                (b"" if after is None else after, max(0, urls))).fetchall()
            return [Event(r[0], bytes(r[1]), r[2], r[3], json.loads(r[4]), r[5], r[6])
                    for r in rows]

        return await self._tx("events_by_url", job, write=False)

    async def warc_files_in_use(self, names: Collection[str]) -> set[str]:
        wanted = sorted(set(names))

        def job(conn: sqlite3.Connection) -> set[str]:
            found: set[str] = set()
            for start in range(0, len(wanted), 500):
                chunk = wanted[start:start + 500]
                found.update(r[0] for r in conn.execute(
                    "SELECT DISTINCT warc_file FROM urls WHERE warc_file IN"
                    f" ({', '.join('?' * len(chunk))})", chunk))
            return found

        return await self._tx("warc_files_in_use", job, write=False)

    async def register_consumer(self, name: str) -> int:
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> int:
            _shard_consumers.refuse_per_shard(conn, name)
            conn.execute("INSERT INTO consumer_cursors (name, position, updated_at)"
                         " SELECT ?, pruned_through, ? FROM outbox_retention"
                         " WHERE true ON CONFLICT (name) DO NOTHING", (name, now))
            return int(conn.execute("SELECT position FROM consumer_cursors WHERE name = ?",
                                    (name,)).fetchone()[0])

        return await self._tx("register_consumer", job)

    async def consumer_position(self, name: str) -> int | None:
        def job(conn: sqlite3.Connection) -> int | None:
            row = conn.execute("SELECT position FROM consumer_cursors WHERE name = ?",
                               (name,)).fetchone()
            return None if row is None else int(row[0])

        return await self._tx("consumer_position", job, write=False)

    async def advance_consumer(self, name: str, position: int) -> int:
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> int:
            _shard_consumers.refuse_per_shard(conn, name)
            conn.execute(
                "INSERT INTO consumer_cursors (name, position, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT (name) DO UPDATE SET position = excluded.position,"
                " updated_at = excluded.updated_at"
                " WHERE excluded.position > consumer_cursors.position",
                (name, max(0, position), now))
            return int(conn.execute("SELECT position FROM consumer_cursors WHERE name = ?",
                                    (name,)).fetchone()[0])

        return await self._tx("advance_consumer", job)

    async def consumers(self) -> dict[str, int]:
        def job(conn: sqlite3.Connection) -> dict[str, int]:
            return {str(r[0]): int(r[1]) for r in conn.execute(
                "SELECT name, position FROM consumer_cursors ORDER BY name")}

        return await self._tx("consumers", job, write=False)

    async def forget_consumer(self, name: str) -> bool:
        def job(conn: sqlite3.Connection) -> bool:
            by_shard = conn.execute("DELETE FROM shard_consumers WHERE name = ?",
                                    (name,)).rowcount > 0
            return conn.execute("DELETE FROM consumer_cursors WHERE name = ?",
                                (name,)).rowcount > 0 or by_shard

        return await self._tx("forget_consumer", job)

    async def register_shard_consumer(self, name: str) -> ShardCursor:
        now = self._clock.now()
        return await self._tx("register_shard_consumer",
                              lambda conn: _shard_consumers.register(conn, name, now))

    async def shard_consumer_position(self, name: str) -> ShardCursor | None:
        return await self._tx("shard_consumer_position",
                              lambda conn: _shard_consumers.position(conn, name), write=False)

    async def advance_shard_consumer(self, name: str, cursor: ShardCursor) -> ShardCursor:
        now = self._clock.now()
        return await self._tx("advance_shard_consumer",
                              lambda conn: _shard_consumers.advance(conn, name, cursor, now))

    async def shard_consumers(self) -> dict[str, ShardCursor]:
        return await self._tx("shard_consumers", _shard_consumers.all_cursors, write=False)

    async def event_counts(self) -> EventCounts:
        return await self._tx("event_counts", _event_counts.read_counts, write=False)

    async def events_pruned_through(self) -> int:
        return await self._tx("events_pruned_through", _retention.pruned_through, write=False)

    async def prune_events(self, before: float, limit: int) -> int:
        return await self._tx("prune_events",
                              lambda conn: _retention.prune_events(conn, before, limit))

    async def prune_audit(self, before: float, limit: int) -> int:
        return await self._tx("prune_audit",
                              lambda conn: _retention.prune_audit(conn, before, limit))

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
