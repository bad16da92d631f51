"""PostgresStore: the shared :class:`~courtier.store.base.Store` of a scaled-out crawl.

Connections come from an asyncpg pool: a lost connection is dropped and replaced
on the next call. A read that hits a lost connection is retried once on a fresh
one; a write raises StoreError (the caller retries; commits are idempotent).
Each public method is one transaction, and the hot ones are one round trip: a
call to a PL/pgSQL function of the schema taking arrays (intake, refill, commit,
outbox read). Every session runs with ``synchronous_commit = on``: an
acknowledged commit is on the server's disk (and on its synchronous standbys).

asyncpg, PostgreSQL and OS errors are raised as :class:`StoreError` naming the
operation and the server (never the password); nothing of a failed call is
applied. Schema set-up and migration happen in :meth:`open` (see ``_schema``).

The class holds the pool, hosts, the refresh plan, the archive and the figures; the
URL methods (intake, refill, commit) are mixed in from ``_urls.py`` and the cluster's
from ``_cluster.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, TypeVar

import asyncpg

from courtier.clock import Clock, RealClock
from courtier.errors import StoreError
from courtier.store.base import (
    DayCount,
    Event,
    HostRecord,
    HostTierRecord,
    PayloadLocation,
    ReparseEvent,
    SegmentRecord,
)
from courtier.store.event_counts import EventCounts
from courtier.store.postgres import (
    _archive,
    _cluster,
    _event_counts,
    _plans,
    _queries,
    _rows,
    _schema,
    _urls,
)
from courtier.store.postgres._rows import Conn
from courtier.store.postgres.dsn import describe_dsn

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


class PostgresStore(_urls.PostgresUrls, _cluster.PostgresCluster):
    """A Store in one PostgreSQL database, shared by any number of processes.

    ``dsn`` is a ``postgresql://`` URL. ``clock`` stamps events and host updates.
    """

    def __init__(
        self, dsn: str, clock: Clock | None = None, *, min_size: int = 1, max_size: int = 8,
        connect_timeout: float = 10.0,
    ) -> None:
        self._dsn = dsn
        self._where = describe_dsn(dsn)
        self._clock: Clock = clock if clock is not None else RealClock()
        self._pool: asyncpg.Pool | None = None
        self._closed = False
        self._sizes = (min_size, max_size)
        self._connect_timeout = connect_timeout
        self._schema_version = 0

    @property
    def schema_version(self) -> int:
        return self._schema_version

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
        attempts = 1 if write else 2  # a read is retried once on a fresh connection
        for attempt in range(attempts):
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
                # next call, or the retry of a read, gets a fresh one.
                await pool.expire_connections()
                if attempt + 1 == attempts:
                    raise self._fail(op, exc) from exc
            except DRIVER_ERRORS as exc:
                raise self._fail(op, exc) from exc
        raise AssertionError("unreachable")

    # -- life cycle ---------------------------------------------------------------

    async def open(self) -> None:
        """Connect (a pool) and create or migrate the schema. Idempotent."""
        if self._pool is not None:
            return
        if self._closed:
            raise StoreError(f"PostgreSQL store {self._where} was closed; create a new one")
        try:
            pool = await asyncpg.create_pool(
                self._dsn, min_size=self._sizes[0], max_size=self._sizes[1],
                timeout=self._connect_timeout, command_timeout=300,
                server_settings={"synchronous_commit": "on", "application_name": "courtier"},
                reset=_keep_session,
            )
        except DRIVER_ERRORS as exc:
            raise self._fail("connect", exc) from exc
        except ValueError as exc:  # a malformed DSN
            raise StoreError(f"PostgreSQL store {self._where}: bad URL: {exc}") from exc
        try:
            async with pool.acquire() as conn:
                self._schema_version = await _schema.migrate(conn)
        except BaseException as exc:
            await pool.close()
            if isinstance(exc, DRIVER_ERRORS):
                raise self._fail("schema migration", exc) from exc
            raise
        self._pool = pool

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

    # -- refresh plan (URLs: see _urls.py; cluster: _cluster.py; plan: _plans.py) ------

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
                               lambda conn: _queries.payload_locations(conn, wanted), write=False)

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

    async def requeue_archive_file(self, warc_file: str, now: float) -> int:
        return await self._run("requeue_archive_file",
                               lambda conn: _archive.requeue_archive_file(conn, warc_file, now))

    async def read_events(self, after: int, limit: int) -> list[Event]:
        """Events with position > ``after`` (see the sequencer in migration 0002)."""
        async def job(conn: Conn) -> list[Event]:
            rows = await conn.fetch("SELECT * FROM courtier_read_events($1, $2)",
                                    after, max(0, limit))
            return [Event(r["read_pos"], bytes(r["url_key"]), r["version"], r["created_at"],
                          json.loads(r["payload"])) for r in rows]

        return await self._run("read_events", job)

    async def counts(self) -> dict[str, int]:
        return await self._run("counts", _queries.counts, write=False)

    async def event_counts(self) -> EventCounts:
        return await self._run("event_counts", _event_counts.read_counts, write=False)


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
