"""PostgresStore: the shared :class:`~courtier.store.base.Store` of a scaled-out crawl.

Connections come from an asyncpg pool: a lost connection is dropped and replaced
on the next call. A read that hits a lost connection is retried once on a fresh
one; a write raises StoreError (the caller retries; commits are idempotent). A call
given a connection whose session the server had already ended, before the call sent
anything (:func:`_ended_before_sent`), is retried once on a fresh connection, a write
too: nothing of it was applied.
Each public method is one transaction, and the hot ones are one round trip: a
call to a PL/pgSQL function of the schema taking arrays (intake, refill, commit,
outbox read). Every session runs with ``synchronous_commit = on``: an
acknowledged commit is on the server's disk (and on its synchronous standbys).

asyncpg, PostgreSQL and OS errors are raised as :class:`StoreError` naming the
operation and the server (never the password); nothing of a failed call is
applied. Schema set-up and migration happen in :meth:`open` (see ``_schema``).

One class holds the state (the pool, the clock, the schema version) and every method
of the contract, each one transaction through :meth:`PostgresStore._run`; the
transaction bodies that are more than a statement or two are functions taking the
connection in the private modules: ``_intake`` (URL intake), ``_queries`` (hosts,
requeues, figures), ``_plans`` (the refresh plan), ``_archive``, ``_event_counts``
and ``_cluster`` (epoch fencing, lease-row lock order, the cluster statements).

URL calls: rows are keyed ``(shard, url_key)``, the shard read from the key. A call
given shard ``epochs`` is fenced: it acts only on the shards whose stored epoch is
still the given one (:func:`~courtier.store.postgres._cluster.fenced_shards` locks
them for the rest of its transaction). Cluster calls: every lease, heartbeat and
IP-slot time is the server's ``clock_timestamp()`` (``courtier_now()``); the ``now``
arguments of the protocol are ignored, so workers with skewed clocks still agree on
who owns what. Decisions that read then write (an acquisition, a day-count grant, an
IP slot) lock their rows first, in a fixed order, inside one transaction.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import astuple, replace
from itertools import chain
from typing import Any, TypeVar

import asyncpg

from courtier.core.clock import Clock, RealClock
from courtier.core.errors import EventsPruned, StoreError
from courtier.dedup.fingerprint64 import from_signed64
from courtier.store.base import (
    OVERDUE_AFTER,
    UNPLACED,
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
    LeaseRecord,
    ScopeRule,
    TrapStats,
    WorkerRecord,
)
from courtier.store.cluster_rules import check_scope_kinds
from courtier.store.event_counts import EventCounts
from courtier.store.postgres import (
    _archive,
    _citus,
    _cluster,
    _event_counts,
    _intake,
    _payload_index,
    _plans,
    _queries,
    _retention,
    _rows,
    _schema,
    _shard_consumers,
    _shard_ranges,
)
from courtier.store.postgres._rows import Conn
from courtier.store.postgres.dsn import STALLED_TRANSACTION_TIMEOUT, describe_dsn
from courtier.store.postgres.pool_log import install as one_line_pool_warnings
from courtier.store.shard_reads import advance, check_unpruned, plan_reads

T = TypeVar("T")

#: errors of the driver, the server and the network that become StoreError
DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    asyncio.TimeoutError,
)

#: seconds :meth:`PostgresStore.close` waits for a graceful close of the pool
CLOSE_WAIT = 10.0

#: errors meaning the connection died (the pool replaces it on the next acquire)
CONNECTION_LOST: tuple[type[BaseException], ...] = (
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.AdminShutdownError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    ConnectionError,
)


#: asyncpg's refusal to start a statement while the protocol still waits for the end of
#: an exchange nobody started: the server's FATAL message of a session it ended
#: (``pg_terminate_backend``, a restart, the stalled-transaction timeout) read before the
#: close of the socket. The statement was not sent, and the connection is aborted.
_ENDED_SESSION = re.compile(
    r"cannot switch to state \d+; another operation \(\d+\) is in progress")


class PostgresStore:
    """A Store in one PostgreSQL database, shared by any number of processes.

    ``dsn`` is a ``postgresql://`` URL. ``clock`` stamps events and host updates.
    """

    def __init__(
        self, dsn: str, clock: Clock | None = None, *, min_size: int = 1, max_size: int = 8,
        connect_timeout: float = 10.0,
        stalled_transaction_timeout: float = STALLED_TRANSACTION_TIMEOUT,
    ) -> None:
        self._dsn = dsn
        self._where = describe_dsn(dsn)
        self._clock: Clock = clock if clock is not None else RealClock()
        self._pool: asyncpg.Pool | None = None
        self._closed = False
        self._sizes = (min_size, max_size)
        self._connect_timeout = connect_timeout
        self._stalled_ms = max(1, round(stalled_transaction_timeout * 1000))
        self._schema_version = 0
        self._on_citus = False

    @property
    def schema_version(self) -> int:
        return self._schema_version

    @property
    def on_citus(self) -> bool:
        """True once :meth:`open` found a Citus coordinator (its tables distributed)."""
        return self._on_citus

    @property
    def where(self) -> str:
        """The server and database, without credentials (for messages)."""
        return self._where

    # -- plumbing ---------------------------------------------------------------

    def _fail(self, op: str, exc: BaseException) -> StoreError:
        return StoreError(f"PostgreSQL store {self._where}: {op} failed: {_reason(exc)}")

    async def _run(self, op: str, fn: Callable[[Conn], Awaitable[T]],
                   write: bool = True, one_statement: bool = False) -> T:
        """Run ``fn`` on a pooled connection: a write in one transaction; a read without
        one. Every read statement sees its own snapshot either way (READ COMMITTED, the
        isolation of every courtier transaction), so an explicit BEGIN … COMMIT around a
        read adds two round trips and no guarantee; a read with a single statement is
        one round trip (a worker reads the payload index once per page). A write that is
        ``one_statement`` (one function call, atomic by itself) also goes without one."""
        pool = self._pool
        if pool is None or self._closed:
            raise StoreError(
                f"PostgreSQL store {self._where}: {op} called on a store that is not open")
        lost_retries = 0 if write else 1  # a read is retried once on a fresh connection
        ended_retries = 1  # any call given a connection the server had ended (see above)
        while True:
            try:
                async with pool.acquire() as conn:
                    if not write or one_statement:  # see the note above
                        return await fn(conn)
                    async with conn.transaction():
                        return await fn(conn)
            except StoreError:
                raise
            except CONNECTION_LOST as exc:
                # The server dropped this connection, and most likely its siblings too
                # (a restart, a failover): retire every pooled connection so that the
                # next call, or a retry, gets a fresh one.
                await pool.expire_connections()
                if ended_retries and _ended_before_sent(exc):
                    ended_retries -= 1
                elif lost_retries:
                    lost_retries -= 1
                else:
                    raise self._fail(op, exc) from exc
            except DRIVER_ERRORS as exc:
                raise self._fail(op, exc) from exc

    # -- life cycle ---------------------------------------------------------------

    async def open(self) -> None:
        """Connect (a pool) and create or migrate the schema. Idempotent."""
        if self._pool is not None:
            return
        if self._closed:
            raise StoreError(f"PostgreSQL store {self._where} was closed; create a new one")
        one_line_pool_warnings()
        pool = await self._create_pool()
        try:
            async with pool.acquire() as conn:
                self._schema_version = await _schema.migrate(conn)
                if await _citus.is_citus(conn):  # a Citus coordinator: distribute (_citus)
                    await _citus.distribute(conn, _schema.MIGRATION_LOCK)
                    self._on_citus = True
                # today's events and audit rows go to a day partition from the first commit
                await _retention.add_partitions(conn, self._clock.now(), self._on_citus)
            if self._on_citus:  # the sessions get Citus's settings (_citus.SESSION_SETTINGS)
                await pool.close()
                pool = await self._create_pool(_citus.SESSION_SETTINGS)
        except BaseException as exc:
            await pool.close()
            if isinstance(exc, DRIVER_ERRORS):
                raise self._fail("schema migration", exc) from exc
            raise
        self._pool = pool

    async def _create_pool(self, extra: Mapping[str, str] | None = None) -> asyncpg.Pool:
        """The connection pool, every session with the store's settings (and ``extra``)."""
        try:
            return await asyncpg.create_pool(
                self._dsn, min_size=self._sizes[0], max_size=self._sizes[1],
                timeout=self._connect_timeout, command_timeout=300,
                server_settings={
                    "synchronous_commit": "on", "application_name": "courtier",
                    # a transaction whose client stopped (SIGSTOP, swap, a partition) is
                    # ended by the server, so its row locks never stall the other workers
                    "idle_in_transaction_session_timeout": str(self._stalled_ms),
                    # no JIT: every statement is short, and compiling cost seconds a session
                    # (asyncpg's type lookup on Citus, whose shard filter inflates its cost)
                    "jit": "off",
                    **(extra or {}),
                },
                reset=_keep_session,
            )
        except DRIVER_ERRORS as exc:
            raise self._fail("connect", exc) from exc
        except ValueError as exc:  # a malformed DSN
            raise StoreError(f"PostgreSQL store {self._where}: bad URL: {exc}") from exc

    async def close(self) -> None:
        """Close the pool: gracefully, or after :data:`CLOSE_WAIT` seconds by terminating
        the connections (one never given back, or a server that does not answer, must
        not keep a leaving process alive)."""
        pool, self._pool = self._pool, None
        self._closed = True
        if pool is not None:
            try:
                async with asyncio.timeout(CLOSE_WAIT):
                    await pool.close()
            except TimeoutError:
                pool.terminate()  # pool.close() terminated them already; harmless again
            except DRIVER_ERRORS as exc:
                raise self._fail("close", exc) from exc

    # -- URLs: intake, refill, hand-backs, commit, one URL's row --------------------------

    async def add_urls(self, urls: Sequence[NewUrl]) -> int:
        """One round trip per batch; batches of ``COPY_THRESHOLD`` rows or more (seed files)
        go through COPY instead (same rules, see ``_intake``)."""
        if len(urls) >= _intake.COPY_THRESHOLD:
            return await self.add_urls_bulk(urls)
        if not urls:
            return 0
        rows = _rows.new_url_rows(urls)
        return await self._run("add_urls", lambda conn: _intake.add_rows(conn, rows),
                               one_statement=True)

    async def add_urls_bulk(self, urls: Sequence[NewUrl]) -> int:
        """Like :meth:`add_urls`, through COPY into a temporary table (big seed files)."""
        if not urls:
            return 0
        rows = _rows.new_url_rows(urls)
        return await self._run("add_urls_bulk", lambda conn: _intake.copy_rows(conn, rows))

    async def load_due(self, shards: Sequence[int], now: float, limit: int, per_host_limit: int,
                       skip_hosts: Collection[str] = (),
                       epochs: Mapping[int, int] | None = None) -> list[DueUrl]:
        if limit <= 0 or per_host_limit <= 0 or not shards:
            return []
        wanted, skip = sorted(set(shards)), sorted(set(skip_hosts))

        async def job(conn: Conn) -> list[DueUrl]:
            mine = wanted if epochs is None else sorted(
                set(wanted) & await _cluster.fenced_shards(conn, epochs, self._on_citus))
            rows = await conn.fetch(
                "SELECT * FROM courtier_load_due($1, $2, $3, $4, $5, $6) ORDER BY walk",
                mine, now, now - OVERDUE_AFTER, limit, per_host_limit, skip)
            return [_rows.due_url(r) for r in rows]

        return await self._run("load_due", job)

    async def read_due(self, shards: Sequence[int], now: float, limit: int, per_host_limit: int,
                       skip_hosts: Collection[str] = (),
                       epochs: Mapping[int, int] | None = None) -> list[DueUrl]:
        """One statement, no transaction, no lock (migration 0024's ``courtier_read_due``);
        with ``epochs`` the fence is read in that statement's snapshot."""
        if limit <= 0 or per_host_limit <= 0 or not shards:
            return []
        wanted, skip = sorted(set(shards)), sorted(set(skip_hosts))
        args: list[object] = [now, now - OVERDUE_AFTER, limit, per_host_limit, skip, wanted]
        if epochs is None:
            chosen = "$6::integer[]"
        else:
            chosen = ("ARRAY(SELECT t.s FROM unnest($6::integer[]) AS t(s)"
                      " LEFT JOIN unnest($7::integer[], $8::integer[]) AS e(s, epoch)"
                      " ON e.s = t.s LEFT JOIN shards x ON x.shard = t.s"
                      " WHERE e.epoch = coalesce(x.epoch, 0) ORDER BY t.s)")
            args += [list(epochs), list(epochs.values())]
        sql = f"SELECT * FROM courtier_read_due({chosen}, $1, $2, $3, $4, $5) ORDER BY walk"

        async def job(conn: Conn) -> list[DueUrl]:
            return [_rows.due_url(r) for r in await conn.fetch(sql, *args)]

        return await self._run("read_due", job, write=False)

    async def reset_scheduled(self, shards: Sequence[int],
                              epochs: Mapping[int, int] | None = None) -> int:
        async def job(conn: Conn) -> int:
            mine = list(shards) if epochs is None else sorted(
                set(shards) & await _cluster.fenced_shards(conn, epochs, self._on_citus))
            return await _queries.reset_scheduled(conn, mine)

        return await self._run("reset_scheduled", job)

    async def release(self, items: Sequence[tuple[bytes, float]],
                      epochs: Mapping[int, int] | None = None) -> int:
        if not items:
            return 0
        ordered = sorted((_rows.key_shard(k), k, at) for k, at in items)

        async def job(conn: Conn) -> int:
            mine = ordered
            if epochs is not None:
                allowed = await _cluster.fenced_shards(conn, epochs, self._on_citus)
                mine = [item for item in ordered if item[0] in allowed]
            rows = await conn.fetch(
                f"UPDATE urls u SET state = {_rows.QUEUED}, next_fetch_at = t.at"
                " FROM unnest($1::integer[], $2::bytea[], $3::float8[]) AS t(shard, url_key, at)"
                " WHERE u.shard = t.shard AND u.url_key = t.url_key"
                " AND u.shard = ANY($1::integer[])"  # Citus prunes by it (docs/scale-out.md)
                f" AND u.state = {_rows.SCHEDULED}"
                " RETURNING u.shard, u.host_key, u.next_fetch_at, u.priority",
                [s for s, _, _ in mine], [k for _, k, _ in mine], [at for _, _, at in mine])
            await _queries.queue_add(conn, rows)
            return len(rows)

        return await self._run("release", job)

    async def postpone(self, items: Sequence[tuple[bytes, int, float]],
                       epochs: Mapping[int, int] | None = None) -> int:
        """QUEUED rows still at their version → due later; each (host, level) they sat
        in is recomputed by one seek (``courtier_levels_refresh``, which locks the hosts'
        queue rows in key order after the rows, as a commit does)."""
        if not items:
            return 0
        ordered = sorted((_rows.key_shard(k), k, v, at) for k, v, at in items)

        async def job(conn: Conn) -> int:
            mine = ordered
            if epochs is not None:
                allowed = await _cluster.fenced_shards(conn, epochs, self._on_citus)
                mine = [item for item in ordered if item[0] in allowed]
            rows = await conn.fetch(
                "UPDATE urls u SET next_fetch_at = t.at FROM unnest($1::integer[],"
                " $2::bytea[], $3::integer[], $4::float8[]) AS t(shard, url_key, version, at)"
                " WHERE u.shard = t.shard AND u.url_key = t.url_key AND u.version = t.version"
                " AND u.shard = ANY($1::integer[])"  # Citus prunes by it (docs/scale-out.md)
                f" AND u.state = {_rows.QUEUED} RETURNING u.shard, u.host_key, u.priority",
                [s for s, _, _, _ in mine], [k for _, k, _, _ in mine],
                [v for _, _, v, _ in mine], [at for _, _, _, at in mine])
            if rows:
                await conn.execute(
                    "SELECT courtier_levels_refresh($1::integer[], $2::text[], $3::integer[])",
                    [r["shard"] for r in rows], [r["host_key"] for r in rows],
                    [r["priority"] for r in rows])
            return len(rows)

        return await self._run("postpone", job)

    async def seed_urls(self, limit: int = 100_000) -> list[str]:
        async def job(conn: Conn) -> list[str]:
            rows = await conn.fetch(
                "SELECT url FROM urls WHERE depth = 0 ORDER BY discovered_at, url LIMIT $1",
                max(0, limit))
            return [r["url"] for r in rows]

        return await self._run("seed_urls", job, write=False)

    async def next_due_at(self, shards: Sequence[int], pending_only: bool = False) -> float | None:
        pending = " AND (u.version = 0 OR u.failure_count > 0)" if pending_only else ""
        sql = ("SELECT min((SELECT u.next_fetch_at FROM urls u WHERE u.shard = s"
               f" AND u.state = {_rows.QUEUED}{pending} ORDER BY u.next_fetch_at LIMIT 1))"
               " FROM unnest($1::integer[]) AS s")
        if self._on_citus:
            sql = _citus.next_due_at_sql(pending)

        async def job(conn: Conn) -> float | None:
            value = await conn.fetchval(sql, sorted(set(shards)))
            return None if value is None else float(value)

        return await self._run("next_due_at", job, write=False)

    async def pending_counts(self, shards: Sequence[int]) -> tuple[int, int]:
        async def job(conn: Conn) -> tuple[int, int]:
            row = await conn.fetchrow(
                "SELECT count(*) FILTER (WHERE version = 0),"
                " count(*) FILTER (WHERE version > 0 AND failure_count > 0)"
                " FROM urls WHERE shard = ANY($1::integer[])"
                f" AND state = {_rows.QUEUED}", sorted(set(shards)))
            return (0, 0) if row is None else (int(row[0]), int(row[1]))

        return await self._run("pending_counts", job, write=False)

    async def due_within(self, shards: Sequence[int], until: float) -> int:
        async def job(conn: Conn) -> int:
            value = await conn.fetchval(
                "SELECT count(*) FROM urls WHERE shard = ANY($1::integer[])"
                f" AND state = {_rows.QUEUED} AND next_fetch_at < $2",
                sorted(set(shards)), until)
            return int(value or 0)

        return await self._run("due_within", job, write=False)

    async def commit(self, commits: Sequence[FetchCommit],
                     host_stats: Sequence[HostStatsDelta] = ()) -> CommitResult:
        if not commits and not host_stats:
            return CommitResult(applied=0, stale=0, new_urls=0)
        rows = _rows.commit_rows(commits)
        new = _rows.new_url_rows(chain.from_iterable(c.new_urls for c in commits))
        stats, now = _rows.host_delta_rows(host_stats), self._clock.now()

        async def job(conn: Conn) -> CommitResult:
            done = await conn.fetchrow(
                "SELECT courtier_commit($1::courtier_commit[], $2::courtier_new_url[],"
                " $3::courtier_host_delta[], $4), pg_current_xact_id()", rows, new, stats, now)
            assert done is not None
            (applied, stale, added), xid = done
            await _event_counts.add_commit_counts(conn, commits, now, xid)
            return CommitResult(applied=applied, stale=stale, new_urls=added)

        if not self._on_citus:
            return await self._run("commit", job)

        # Citus: the commit per Citus shard, its tallies with it, then the payload index
        # rows in transactions of their own (_payload_index; docs/scale-out.md, "A commit
        # batch without two-phase commit")
        tallies = _event_counts.written_names(commits)

        async def routed(conn: Conn) -> list[int]:
            return list(await conn.fetchval(
                "SELECT courtier_commit_routed($1::courtier_commit[], $2::courtier_new_url[],"
                " $3::courtier_host_delta[], $4, $5::integer[], $6::bytea[], $7::integer[],"
                " $8::text[])", rows, new, stats, now, *tallies))

        out = await self._run("commit", routed)
        indexed = _payload_index.first_copies(commits, out[3:])

        async def index(conn: Conn) -> None:
            await _payload_index.index_payloads(conn, indexed)

        if indexed:
            await self._run("commit", index, one_statement=True)
        return CommitResult(applied=out[0], stale=out[1], new_urls=out[2])

    async def get_url(self, url_key: bytes) -> dict[str, Any] | None:
        shard = _rows.key_shard(url_key)

        async def job(conn: Conn) -> dict[str, Any] | None:
            row = await conn.fetchrow(
                "SELECT * FROM urls WHERE shard = $1 AND url_key = $2", shard, url_key)
            if row is None:
                return None
            result = dict(row)
            result["url_key"] = bytes(result["url_key"])
            result["url_key_hex"] = result["url_key"].hex()
            return result

        return await self._run("get_url", job, write=False)

    # -- cluster: workers, shard leases, shared budgets (contract: store/cluster.py) -----

    async def store_now(self) -> float:
        async def job(conn: Conn) -> float:
            return float(await conn.fetchval("SELECT courtier_now()"))

        return await self._run("store_now", job, write=False)

    async def heartbeat(self, worker_id: str, weight: float, info: Mapping[str, Any],
                        now: float, lease_seconds: float | None = None) -> float:
        text = json.dumps(dict(info), separators=(",", ":"))
        renew = lease_seconds is not None
        # a new row without a renewal gets no lease (its expiry 0)
        lease = float(lease_seconds) if lease_seconds is not None else float("-inf")

        async def job(conn: Conn) -> float:
            if renew:
                await _cluster.lock_for_renewal(conn, self._on_citus)
            sql = _cluster.HEARTBEAT_RENEWING if renew else _cluster.HEARTBEAT
            return float(await conn.fetchval(sql, worker_id, weight, text, lease))

        return await self._run("heartbeat", job)

    async def leave(self, worker_id: str) -> None:
        async def job(conn: Conn) -> None:
            for statement in _cluster.LEAVE:
                await conn.execute(statement, worker_id)

        await self._run("leave", job)

    async def prune_workers(self, max_age: float, now: float) -> list[str]:
        async def job(conn: Conn) -> list[str]:
            rows = await conn.fetch(_cluster.PRUNE, float(max_age))
            return sorted(str(r["worker_id"]) for r in rows if r["member"])

        return await self._run("prune_workers", job)

    async def cluster_view(self, shards: Collection[int] | None = None) -> ClusterView:
        wanted = None if shards is None else sorted(set(shards))

        async def job(conn: Conn) -> ClusterView:
            row = _cluster.one_row(await conn.fetchrow(_cluster.VIEW_SQL, wanted))
            workers = [WorkerRecord(w, float(weight), float(beat), float(start), info)
                       for w, weight, beat, start, info in json.loads(row["workers"])]
            leases = [LeaseRecord(int(s), o, int(e), float(x), float(a))
                      for s, o, e, x, a in json.loads(row["leases"])]
            counters = {k: int(v) for k, v in json.loads(row["counters"] or "{}").items()}
            return ClusterView(float(row["now"]), workers, leases, counters)

        return await self._run("cluster_view", job, write=False)

    async def acquire_shards(self, owner: str, shards: Sequence[int], now: float,
                             lease_seconds: float) -> dict[int, int]:
        wanted = sorted(set(shards))
        if not wanted:
            return {}

        async def job(conn: Conn) -> dict[int, int]:
            scope = await _cluster.lock_for_acquisition(conn, owner, wanted, self._on_citus)
            rows = await conn.fetch("SELECT * FROM courtier_acquire_shards($1, $2, $3)",
                                    owner, scope, float(lease_seconds))
            return {int(r["shard"]): int(r["epoch"]) for r in rows}

        return await self._run("acquire_shards", job)

    async def renew_shards(self, owner: str, epochs: dict[int, int], now: float,
                           lease_seconds: float) -> set[int]:
        items = sorted(epochs.items())
        if not items:
            return set()

        async def job(conn: Conn) -> set[int]:
            await _cluster.lock_for_renewal(conn, self._on_citus)
            await conn.execute(_cluster.RENEW_WORKER_LEASE, owner, float(lease_seconds))
            # a statement of its own: its snapshot follows the lease row's lock, so a
            # takeover that committed while the renewal waited for it is seen here
            rows = await conn.fetch(_cluster.STILL_OWNED, [s for s, _ in items],
                                    [e for _, e in items], owner)
            return {int(r["shard"]) for r in rows}

        return await self._run("renew_shards", job)

    async def release_shards(self, owner: str, shards: Sequence[int],
                             epochs: Mapping[int, int] | None = None) -> None:
        wanted = sorted(set(shards) if epochs is None else set(shards) & set(epochs))
        fence = [0 if epochs is None else epochs[s] for s in wanted]

        async def job(conn: Conn) -> None:
            await _cluster.lock_in_order(conn, wanted, self._on_citus)
            rows = await conn.fetch(
                "UPDATE shards s SET owner = NULL, epoch = s.epoch + 1, acquired_at = 0"
                " FROM unnest($1::integer[], $2::bigint[]) AS t(shard, epoch)"
                " WHERE s.shard = t.shard AND s.owner = $3 AND ($4 OR s.epoch = t.epoch)"
                " RETURNING s.shard", wanted, fence, owner, epochs is None)
            await _queries.reset_scheduled(conn, [int(r["shard"]) for r in rows])

        if wanted:
            await self._run("release_shards", job)

    async def reserve_day_counts(self, reservations: Sequence[DayReservation]
                                 ) -> dict[str, DayGrant]:
        asks = sorted(reservations, key=lambda a: a.key)  # stable: one key keeps its order
        if not asks:
            return {}

        async def job(conn: Conn) -> dict[str, DayGrant]:
            rows = await conn.fetch(
                "SELECT * FROM courtier_reserve_day_counts($1, $2, $3, $4)",
                [a.key for a in asks], [float(a.day_start) for a in asks],
                [a.n for a in asks], [a.limit for a in asks])
            return {r["budget_key"]: DayGrant(r["budget_key"], float(r["day_start"]),
                                              int(r["granted"]), int(r["used"])) for r in rows}

        return await self._run("reserve_day_counts", job)

    async def save_host_clocks(self, clocks: Sequence[HostClock]) -> None:
        # one row per host (the last given), keyed by the shard its key names
        latest = {c.host_key: replace(c, shard=_rows.host_shard(c.host_key)) for c in clocks}
        rows = [astuple(latest[k])[:-1] for k in sorted(latest)]
        if not rows:
            return
        names = _cluster.CLOCK_COLUMNS[:-1]
        columns = ", ".join((*names, "saved_at"))
        casts = ", ".join(f"${i + 1}::{_cluster.pg_type(n)}[]" for i, n in enumerate(names))
        updates = ", ".join(f"{n} = EXCLUDED.{n}" for n in (*names, "saved_at")
                            if n != "host_key")

        async def job(conn: Conn) -> None:
            await conn.execute(
                f"INSERT INTO host_clocks ({columns}) SELECT *, courtier_now()"
                f" FROM unnest({casts}) ON CONFLICT (shard, host_key) DO UPDATE SET {updates}",
                *[list(col) for col in zip(*rows, strict=True)])

        await self._run("save_host_clocks", job)

    async def load_host_clocks(self, host_keys: Collection[str]) -> dict[str, HostClock]:
        keys = sorted(set(host_keys))
        if not keys:
            return {}

        async def job(conn: Conn) -> dict[str, HostClock]:
            rows = await conn.fetch(
                f"SELECT {', '.join(_cluster.CLOCK_COLUMNS)} FROM host_clocks"
                " WHERE (shard, host_key) IN (SELECT * FROM unnest($1::integer[], $2::text[]))",
                [_rows.host_shard(k) for k in keys], keys)
            return {r["host_key"]: HostClock(*r) for r in rows}

        return await self._run("load_host_clocks", job, write=False)

    async def save_trap_stats(self, stats: Sequence[TrapStats]) -> None:
        latest = {s.host_key: s for s in stats}  # one row per host: the last given
        keys = sorted(latest)
        if not keys:
            return

        async def job(conn: Conn) -> None:
            await conn.execute(
                "INSERT INTO trap_stats (shard, host_key, data, saved_at)"
                " SELECT s, h, d, courtier_now()"
                " FROM unnest($1::integer[], $2::text[], $3::bytea[]) AS t(s, h, d)"
                " ON CONFLICT (shard, host_key) DO UPDATE"
                " SET data = EXCLUDED.data, saved_at = EXCLUDED.saved_at",
                [_rows.host_shard(k) for k in keys], keys, [bytes(latest[k].data) for k in keys])

        await self._run("save_trap_stats", job)

    async def load_trap_stats(self, host_keys: Collection[str]) -> dict[str, TrapStats]:
        keys = sorted(set(host_keys))
        if not keys:
            return {}

        async def job(conn: Conn) -> dict[str, TrapStats]:
            rows = await conn.fetch(
                "SELECT host_key, shard, data, saved_at FROM trap_stats"
                " WHERE (shard, host_key) IN (SELECT * FROM unnest($1::integer[], $2::text[]))",
                [_rows.host_shard(k) for k in keys], keys)
            return {r["host_key"]: TrapStats(r["host_key"], int(r["shard"]), bytes(r["data"]),
                                             float(r["saved_at"])) for r in rows}

        return await self._run("load_trap_stats", job, write=False)

    async def load_simhashes(self, shards: Collection[int], limit_per_shard: int
                             ) -> dict[int, list[tuple[bytes, int]]]:
        wanted = sorted(set(shards))
        if not wanted or limit_per_shard <= 0:
            return {}

        async def job(conn: Conn) -> dict[int, list[tuple[bytes, int]]]:
            sql = _citus.RECENT_SIMHASHES if self._on_citus else _cluster.RECENT_SIMHASHES
            rows = await conn.fetch(sql, wanted, limit_per_shard)
            out: dict[int, list[tuple[bytes, int]]] = {}
            for r in rows:
                out.setdefault(int(r["shard"]), []).append(
                    (bytes(r["url_key"]), from_signed64(int(r["simhash"]))))
            return out

        return await self._run("load_simhashes", job, write=False)

    async def url_keys(self, shards: Sequence[int], after: bytes, limit: int) -> bytes:
        wanted = sorted(set(shards))
        if not wanted or limit <= 0:
            return b""

        async def job(conn: Conn) -> bytes:
            # one bytea of the keys (no row object per key on the client); the primary key
            # (shard, url_key) returns them in order for the shards asked
            blob = await conn.fetchval(
                "SELECT string_agg(url_key, ''::bytea ORDER BY shard, url_key) FROM ("
                " SELECT shard, url_key FROM urls WHERE shard = ANY($1::int[])"
                " AND url_key > $2 ORDER BY shard, url_key LIMIT $3) k",
                wanted, after, limit)
            return bytes(blob) if blob is not None else b""

        return await self._run("url_keys", job, write=False)

    async def acquire_ip_slot(self, ip: str, owner: str, max_concurrent: int,
                              min_gap: float, ttl: float, now: float) -> IpGrant:
        async def job(conn: Conn) -> IpGrant:
            r = _cluster.one_row(await conn.fetchrow(
                "SELECT * FROM courtier_acquire_ip_slot($1, $2, $3, $4, $5)",
                ip, owner, max_concurrent, float(min_gap), float(ttl)))
            return IpGrant(bool(r["granted"]), float(r["now"]), int(r["token"]),
                           float(r["expires_at"]), float(r["retry_at"]))

        return await self._run("acquire_ip_slot", job)

    async def release_ip_slot(self, ip: str, token: int) -> None:
        async def job(conn: Conn) -> None:
            await conn.execute("DELETE FROM ip_slots WHERE ip = $1 AND token = $2", ip, token)

        await self._run("release_ip_slot", job)

    async def release_ip_slots_of(self, owner: str) -> int:
        async def job(conn: Conn) -> int:
            status = await conn.execute("DELETE FROM ip_slots WHERE owner = $1", owner)
            return int(status.split()[-1])

        return await self._run("release_ip_slots_of", job)

    async def add_scope_rules(self, rules: Sequence[ScopeRule]) -> int:
        check_scope_kinds(rules)
        batch = list(dict.fromkeys((r.kind, r.value) for r in rules))
        if not batch:
            return 0

        async def job(conn: Conn) -> int:
            rows = await conn.fetch(
                "INSERT INTO scope_rules (kind, value, added_at)"
                " SELECT k, v, courtier_now() FROM unnest($1::text[], $2::text[])"
                " WITH ORDINALITY AS t(k, v, n) ORDER BY n"
                " ON CONFLICT (kind, value) DO NOTHING RETURNING id",
                [k for k, _ in batch], [v for _, v in batch])
            return len(rows)

        return await self._run("add_scope_rules", job)

    async def scope_rules(self, after: int = 0) -> list[ScopeRule]:
        async def job(conn: Conn) -> list[ScopeRule]:
            rows = await conn.fetch(
                "SELECT id, kind, value FROM scope_rules WHERE id > $1 ORDER BY id", after)
            return [ScopeRule(r["kind"], r["value"], int(r["id"])) for r in rows]

        return await self._run("scope_rules", job, write=False)

    # -- refresh plan (see _plans.py) ----------------------------------------------------

    async def set_values(self, items: Sequence[tuple[bytes, float | None]]) -> int:
        rows = list(items)
        return await self._run("set_values", lambda conn: _plans.set_values(conn, rows))

    async def url_values(self, url_keys: Collection[bytes]) -> dict[bytes, float]:
        return await self._run("url_values", lambda conn: _plans.url_values(conn, url_keys),
                               write=False)

    async def set_host_tier(self, record: HostTierRecord) -> None:
        now = self._clock.now()
        await self._run("set_host_tier", lambda conn: _plans.set_host_tier(conn, record, now))

    async def host_tiers(self, host_keys: Collection[str]) -> dict[str, HostTierRecord]:
        return await self._run("host_tiers", lambda conn: _plans.host_tiers(conn, host_keys),
                               write=False)

    async def tier_counts(self, shards: Sequence[int], until: float) -> dict[str, int]:
        return await self._run("tier_counts",
                               lambda conn: _plans.tier_counts(conn, shards, until), write=False)

    # -- hosts ----------------------------------------------------------------------------

    async def load_host(self, host_key: str) -> HostRecord | None:
        return await self._run("load_host", lambda conn: _queries.load_host(conn, host_key),
                               write=False)

    async def save_robots(self, record: HostRecord) -> None:
        now = self._clock.now()
        await self._run("save_robots", lambda conn: _queries.save_robots(conn, record, now))

    async def set_policy(self, host_key: str, shard: int, delay: float | None,
                         max_in_flight: int | None, max_pages: int | None,
                         blocked: bool) -> None:
        policy, now = (delay, max_in_flight, max_pages, blocked), self._clock.now()
        await self._run("set_policy",
                        lambda conn: _queries.set_policy(conn, host_key, policy, now))

    async def save_backoff(self, host_key: str, shard: int, until: float) -> None:
        now = self._clock.now()
        await self._run("save_backoff",
                        lambda conn: _queries.save_backoff(conn, host_key, until, now))

    async def save_https_upgrade(self, host_key: str, shard: int,
                                 https_host_key: str | None) -> None:
        now = self._clock.now()
        await self._run("save_https_upgrade", lambda conn: _queries.save_https_upgrade(
            conn, host_key, https_host_key, now))

    async def load_day_counts(self, keys: Collection[str]) -> dict[str, DayCount]:
        wanted = list(keys)
        if not wanted:
            return {}

        async def job(conn: Conn) -> dict[str, DayCount]:
            found = await conn.fetch(
                "SELECT budget_key, day_start, used FROM day_counts"
                " WHERE budget_key = ANY($1::text[])", wanted)
            return {r[0]: DayCount(r[0], float(r[1]), int(r[2])) for r in found}

        return await self._run("load_day_counts", job, write=False)

    async def policies_changed(self, since: float) -> list[HostRecord]:
        return await self._run("policies_changed",
                               lambda conn: _queries.policies_changed(conn, since), write=False)

    # -- audit, payloads, events, figures ---------------------------------------------------

    async def fetch_log(self, after: int = 0, limit: int = 1000,
                        url_key: bytes | None = None) -> list[dict[str, Any]]:
        where = None if url_key is None else (_rows.key_shard(url_key), url_key)
        return await self._run("fetch_log", lambda conn: _queries.fetch_log(
            conn, after, limit, where), write=False)

    async def payload_location(self, digest: str) -> PayloadLocation | None:
        return (await self.payload_locations([digest])).get(digest)

    async def payload_locations(self, digests: Sequence[str]) -> dict[str, PayloadLocation]:
        wanted = list(digests)
        if not wanted:
            return {}
        return await self._run("payload_locations",
                               lambda conn: _queries.payload_locations(
                                   conn, wanted, self._on_citus), write=False)

    # -- archive (issue 12): see _archive.py ------------------------------------------------

    async def add_reparse_events(self, events: Sequence[ReparseEvent]) -> int:
        now = self._clock.now()
        return await self._run("add_reparse_events",
                               lambda conn: _archive.add_reparse_events(conn, events, now))

    async def save_segment(self, name: str, owner: str, state: str, size: int) -> None:
        now = self._clock.now()
        await self._run("save_segment",
                        lambda conn: _archive.save_segment(conn, name, owner, state, size, now))

    async def segments(self, owner: str | None = None,
                       states: Collection[str] = ()) -> list[SegmentRecord]:
        return await self._run("segments", lambda conn: _archive.segments(conn, owner, states),
                               write=False)

    async def sitemap_changed(self, items: Sequence[tuple[bytes, float]], now: float) -> int:
        rows = list(items)
        if not rows:
            return 0
        return await self._run("sitemap_changed",
                               lambda conn: _archive.sitemap_changed(conn, rows, now))

    async def requeue_archive_file(self, warc_file: str, now: float) -> int:
        return await self._run("requeue_archive_file",
                               lambda conn: _archive.requeue_archive_file(conn, warc_file, now))

    async def read_events(self, after: int, limit: int) -> list[Event]:
        """Events with position > ``after`` (see the sequencer in migration 0002)."""
        async def job(conn: Conn) -> list[Event]:
            try:
                rows = await conn.fetch("SELECT * FROM courtier_read_events($1, $2)",
                                        after, max(0, limit))
            except asyncpg.PostgresError as exc:
                pruned = _retention.events_pruned(exc, after)
                if pruned is None:
                    raise
                raise pruned from None
            return [Event(r["read_pos"], bytes(r["url_key"]), r["version"], r["created_at"],
                          json.loads(r["payload"])) for r in rows]

        return await self._run("read_events", job)

    async def read_events_by_shard(self, cursor: ShardCursor, limit: int) -> ShardPage:
        """The heads, then the planned ranges, in one snapshot: every position up to a head
        read is committed in it (migration 0032). The events' lock first, so that the
        retention cannot drop a partition (not MVCC) between the two reads: what it
        removed before is in the heads' ``pruned_pos``, what it removes after waits."""
        async def job(conn: Conn) -> ShardPage:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                await conn.execute("LOCK TABLE events IN ACCESS SHARE MODE")
                return await read(conn)

        async def read(conn: Conn) -> ShardPage:
            rows = await conn.fetch("SELECT shard, last_pos, pruned_pos FROM outbox_heads")
            check_unpruned(cursor, {int(r[0]): int(r[2]) for r in rows})
            heads = {int(r[0]): int(r[1]) for r in rows}
            ranges = plan_reads(cursor, heads, limit)
            if not ranges:
                return ShardPage([], cursor)
            return ShardPage(await _shard_ranges.read_ranges(conn, ranges, self._on_citus),
                             advance(cursor, ranges))

        return await self._run("read_events_by_shard", job, write=False)

    async def counts(self) -> dict[str, int]:
        return await self._run("counts", _queries.counts, write=False)

    async def shard_cursor_at(self, position: int) -> ShardCursor:
        """The heads and the lowest unread position of each shard in one snapshot, after
        the events' lock (as :meth:`read_events_by_shard`): every event up to a head is
        in it; one not yet placed (``read_pos`` NULL) will be placed above every position
        handed out, so above ``position``. A grouped join of two tables co-located by
        shard: pushed down on Citus."""
        async def job(conn: Conn) -> ShardCursor:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                await conn.execute("LOCK TABLE events IN ACCESS SHARE MODE")
                through = await _retention.pruned_through(conn)
                if position < through:
                    raise EventsPruned(position, through)
                rows = await conn.fetch(
                    "SELECT h.shard, coalesce(u.low - 1, h.last_pos) FROM outbox_heads h"
                    " LEFT JOIN (SELECT shard, min(shard_pos) AS low FROM events"
                    " WHERE read_pos IS NULL OR read_pos > $1 GROUP BY shard) u"
                    " ON u.shard = h.shard", position)
            return ShardCursor({int(r[0]): int(r[1]) for r in rows})

        return await self._run("shard_cursor_at", job, write=False)

    async def events_by_url(self, after: bytes | None, urls: int) -> list[Event]:
        shard, key = (-1, b"") if after is None else (_rows.key_shard(after), after)

        async def job(conn: Conn) -> list[Event]:
            # the shard is the key's leading bits: (shard, url_key) order is url_key order
            rows = await conn.fetch(
                "WITH keys AS (SELECT DISTINCT shard, url_key FROM events"
                " WHERE (shard, url_key) > ($1, $2) ORDER BY shard, url_key LIMIT $3)"
                " SELECT coalesce(e.read_pos, $4) AS pos, e.url_key, e.version, e.created_at,"
                " e.payload, e.shard, e.shard_pos FROM events e JOIN keys k"
                " ON e.shard = k.shard AND e.url_key = k.url_key"
                " ORDER BY e.shard, e.url_key, pos",
                shard, key, max(0, urls), UNPLACED)
            return [_rows.event_of(r) for r in rows]

        return await self._run("events_by_url", job, write=False)

    async def warc_files_in_use(self, names: Collection[str]) -> set[str]:
        wanted = sorted(set(names))

        async def job(conn: Conn) -> set[str]:
            rows = await conn.fetch("SELECT DISTINCT warc_file FROM urls"
                                    " WHERE warc_file = ANY($1::text[])", wanted)
            return {str(r[0]) for r in rows}

        return await self._run("warc_files_in_use", job, write=False)

    async def register_consumer(self, name: str) -> int:
        now = self._clock.now()

        async def job(conn: Conn) -> int:
            await _shard_consumers.refuse_per_shard(conn, name)
            # the no-op update returns the kept row, also when a concurrent call added it
            position = await conn.fetchval(
                "INSERT INTO consumer_cursors (name, position, updated_at)"
                " SELECT $1, pruned_through, $2 FROM outbox_sequencer"
                " ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING position",
                name, now)
            return int(position)

        return await self._run("register_consumer", job)

    async def consumer_position(self, name: str) -> int | None:
        async def job(conn: Conn) -> int | None:
            position = await conn.fetchval(
                "SELECT position FROM consumer_cursors WHERE name = $1", name)
            return None if position is None else int(position)

        return await self._run("consumer_position", job, write=False)

    async def advance_consumer(self, name: str, position: int) -> int:
        now = self._clock.now()

        async def job(conn: Conn) -> int:
            await _shard_consumers.refuse_per_shard(conn, name)
            await conn.execute(
                "INSERT INTO consumer_cursors (name, position, updated_at) VALUES ($1, $2, $3)"
                " ON CONFLICT (name) DO UPDATE SET position = excluded.position,"
                " updated_at = excluded.updated_at"
                " WHERE excluded.position > consumer_cursors.position",
                name, max(0, position), now)
            return int(await conn.fetchval(
                "SELECT position FROM consumer_cursors WHERE name = $1", name))

        return await self._run("advance_consumer", job)

    async def consumers(self) -> dict[str, int]:
        async def job(conn: Conn) -> dict[str, int]:
            rows = await conn.fetch("SELECT name, position FROM consumer_cursors ORDER BY name")
            return {str(r[0]): int(r[1]) for r in rows}

        return await self._run("consumers", job, write=False)

    async def forget_consumer(self, name: str) -> bool:
        async def job(conn: Conn) -> bool:
            by_shard = await conn.execute("DELETE FROM shard_consumers WHERE name = $1", name)
            status = await conn.execute("DELETE FROM consumer_cursors WHERE name = $1", name)
            return int(status.rsplit(" ", 1)[-1]) + int(by_shard.rsplit(" ", 1)[-1]) > 0

        return await self._run("forget_consumer", job)

    async def register_shard_consumer(self, name: str) -> ShardCursor:
        now = self._clock.now()
        return await self._run("register_shard_consumer",
                               lambda conn: _shard_consumers.register(conn, name, now))

    async def shard_consumer_position(self, name: str) -> ShardCursor | None:
        return await self._run("shard_consumer_position",
                               lambda conn: _shard_consumers.position(conn, name), write=False)

    async def advance_shard_consumer(self, name: str, cursor: ShardCursor) -> ShardCursor:
        now = self._clock.now()
        return await self._run("advance_shard_consumer",
                               lambda conn: _shard_consumers.advance(conn, name, cursor, now))

    async def shard_consumers(self) -> dict[str, ShardCursor]:
        return await self._run("shard_consumers", _shard_consumers.all_cursors, write=False)

    async def event_counts(self) -> EventCounts:
        return await self._run("event_counts", _event_counts.read_counts, write=False)

    async def events_pruned_through(self) -> int:
        return await self._run("events_pruned_through", _retention.pruned_through,
                               write=False)

    async def prune_events(self, before: float, limit: int) -> int:
        """Several transactions of their own (``_retention.py``), hence ``write=False``."""
        now = self._clock.now()
        return await self._run("prune_events", lambda conn: _retention.prune_events(
            conn, before, limit, now, self._on_citus), write=False)

    async def prune_audit(self, before: float, limit: int) -> int:
        now = self._clock.now()
        return await self._run("prune_audit", lambda conn: _retention.prune_audit(
            conn, before, limit, now, self._on_citus), write=False)


def _ended_before_sent(exc: BaseException) -> bool:
    """Whether a call failed because its connection's session was already over when one
    of its statements was to be sent (:data:`_ENDED_SESSION`, maybe under the error of
    the transaction's exit on the aborted connection). None of the call was committed:
    that statement was never sent, and a transaction begun before it ended with the
    session."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, asyncpg.InternalClientError) and _ENDED_SESSION.match(str(seen)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _reason(exc: BaseException) -> str:
    """A one-line cause, with a hint for the common connection failures."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, asyncpg.InvalidPasswordError):
        return f"{text} (wrong password or user)"
    if isinstance(exc, asyncpg.InvalidCatalogNameError):
        return f"{text} (create the database first)"
    if isinstance(exc, ConnectionRefusedError | asyncio.TimeoutError) or (
        isinstance(exc, OSError) and not isinstance(exc, asyncpg.PostgresError)
    ):
        return f"{text} (is the server running and reachable?)"
    return text


async def _keep_session(conn: Conn) -> None:
    """The pool's reset on release, after asyncpg's own (which rolls back a transaction
    left open and drops listeners): nothing more. asyncpg's default also sends
    ``RESET ALL; CLOSE ALL; UNLISTEN *; SELECT pg_advisory_unlock_all()``, one round trip
    per release, for session state courtier never creates (no SET, cursor, LISTEN or
    session-level advisory lock: the migration lock is transaction-level)."""
    del conn
