"""The URL half of the SQLite store: intake, refill, hand-backs, commit, one URL's row.

Mixed into :class:`courtier.store.sqlite.store.SqliteStore`, which provides ``_tx``
(one transaction on the store's thread) and ``_clock``. The transaction bodies live in
:mod:`~courtier.store.sqlite._queries` (intake, hand-backs, figures),
:mod:`~courtier.store.sqlite._refill` (``load_due``) and
:mod:`~courtier.store.sqlite._commit`. A call given shard ``epochs`` is fenced: it acts
only on the shards whose stored epoch is still the given one
(:func:`~courtier.store.sqlite._cluster.fenced_shards`), in the same transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

from courtier.clock import Clock
from courtier.store.base import CommitResult, DueUrl, FetchCommit, HostStatsDelta, NewUrl
from courtier.store.sqlite import _cluster, _commit, _queries, _refill
from courtier.urls import shard_of_key

T = TypeVar("T")


class SqliteUrls:
    """Mixed into SqliteStore (which provides ``_tx`` and ``_clock``)."""

    _clock: Clock

    async def _tx(self, op: str, fn: Callable[[sqlite3.Connection], T],
                  write: bool = True) -> T:
        raise NotImplementedError

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

    async def due_within(self, shards: Sequence[int], until: float) -> int:
        shard_list = list(shards)
        return await self._tx(
            "due_within", lambda conn: _queries.due_within(conn, shard_list, until), write=False
        )
