"""The URL half of the PostgreSQL store: intake, refill, hand-backs, commit, one URL's row.

Mixed into :class:`courtier.store.postgres.store.PostgresStore`, which provides ``_run``
(a pooled connection, a transaction for a write) and ``_clock``. Intake goes through
:mod:`~courtier.store.postgres._intake`; the refill and the commit are one call each
to a PL/pgSQL function of the schema (``courtier_load_due``, ``courtier_commit``).
Rows are keyed ``(shard, url_key)``, the shard read from the key. A call given shard
``epochs`` is fenced: it acts only on the shards whose stored epoch is still the given
one (:func:`~courtier.store.postgres._cluster.fenced_shards` locks them for the rest
of its transaction).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from itertools import chain
from typing import Any, TypeVar

from courtier.clock import Clock
from courtier.store.base import (
    OVERDUE_AFTER,
    CommitResult,
    DueUrl,
    FetchCommit,
    HostStatsDelta,
    NewUrl,
)
from courtier.store.postgres import _cluster, _event_counts, _intake, _queries, _rows
from courtier.store.postgres._rows import Conn

T = TypeVar("T")


class PostgresUrls:
    """Mixed into PostgresStore (which provides ``_run`` and ``_clock``)."""

    _clock: Clock

    async def _run(self, op: str, fn: Callable[[Conn], Awaitable[T]],
                   write: bool = True, one_statement: bool = False) -> T:
        raise NotImplementedError

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
                set(wanted) & await _cluster.fenced_shards(conn, epochs))
            rows = await conn.fetch(
                "SELECT * FROM courtier_load_due($1, $2, $3, $4, $5, $6) ORDER BY walk",
                mine, now, now - OVERDUE_AFTER, limit, per_host_limit, skip)
            return [_rows.due_url(r) for r in rows]

        return await self._run("load_due", job)

    async def reset_scheduled(self, shards: Sequence[int],
                              epochs: Mapping[int, int] | None = None) -> int:
        async def job(conn: Conn) -> int:
            mine = list(shards) if epochs is None else sorted(
                set(shards) & await _cluster.fenced_shards(conn, epochs))
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
                allowed = await _cluster.fenced_shards(conn, epochs)
                mine = [item for item in ordered if item[0] in allowed]
            rows = await conn.fetch(
                f"UPDATE urls u SET state = {_rows.QUEUED}, next_fetch_at = t.at"
                " FROM unnest($1::integer[], $2::bytea[], $3::float8[]) AS t(shard, url_key, at)"
                " WHERE u.shard = t.shard AND u.url_key = t.url_key"
                f" AND u.state = {_rows.SCHEDULED}"
                " RETURNING u.shard, u.host_key, u.next_fetch_at, u.priority",
                [s for s, _, _ in mine], [k for _, k, _ in mine], [at for _, _, at in mine])
            await _queries.queue_add(conn, rows)
            return len(rows)

        return await self._run("release", job)

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
            applied, stale, added = await conn.fetchval(
                "SELECT courtier_commit($1::courtier_commit[], $2::courtier_new_url[],"
                " $3::courtier_host_delta[], $4)", rows, new, stats, now)
            await _event_counts.add_commit_counts(conn, commits)
            return CommitResult(applied=applied, stale=stale, new_urls=added)

        return await self._run("commit", job)

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
