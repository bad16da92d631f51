"""The PostgreSQL side of the outbox tallies (``store/event_counts.py``, migration 0014).

The commit and the re-parse inserts add their events' counts in their own
transaction. ``courtier_commit`` inserts one fetch event per applied commit
(``ON CONFLICT DO NOTHING``), so after it :func:`add_commit_counts` adds, in one
statement, the counter names of the batch's commits whose event this very
transaction wrote (the unique index on ``(shard, url_key, version)`` and the
``xid`` column; no payload is parsed). Each backend adds to its own rows (``slot`` =
its pid), so concurrent commits never wait on a counter row; a read sums the slots.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from courtier.store.base import FetchCommit
from courtier.store.event_counts import EventCounts, counter_names
from courtier.store.postgres._rows import Conn, key_shard

#: one round trip: the counter names of each commit whose event this transaction wrote
_ADD_WRITTEN = (
    "INSERT INTO event_counts (name, slot, n)"
    " SELECT k.name, pg_backend_pid(), count(*)"
    " FROM unnest($1::integer[], $2::bytea[], $3::integer[], $4::text[])"
    " AS k(shard, url_key, version, name)"
    " JOIN events e ON e.shard = k.shard AND e.url_key = k.url_key AND e.version = k.version"
    " WHERE e.xid = (SELECT pg_current_xact_id()) AND e.created_at = $5"
    " GROUP BY k.name ORDER BY k.name"
    " ON CONFLICT (name, slot) DO UPDATE SET n = event_counts.n + excluded.n"
)
_ADD = (
    "INSERT INTO event_counts (name, slot, n)"
    " SELECT name, pg_backend_pid(), n FROM unnest($1::text[], $2::bigint[]) AS c(name, n)"
    " ORDER BY name"
    " ON CONFLICT (name, slot) DO UPDATE SET n = event_counts.n + excluded.n"
)


async def add_counts(conn: Conn, counts: Mapping[str, int]) -> None:
    names = sorted(name for name, n in counts.items() if n)
    if names:
        await conn.execute(_ADD, names, [counts[name] for name in names])


async def add_commit_counts(conn: Conn, commits: Sequence[FetchCommit], now: float) -> None:
    """After ``courtier_commit`` in the same transaction: count the events it wrote (their
    ``created_at`` is the commit's ``now``, which confines the join to that day's
    partition of the outbox, migration time_partitions)."""
    shards: list[int] = []
    keys: list[bytes] = []
    versions: list[int] = []
    names: list[str] = []
    seen: set[tuple[bytes, int]] = set()
    for c in commits:
        # a key repeated at one version: only the first of them can apply (at consecutive
        # versions each applies, in batch order, and writes its own event)
        if (c.url_key, c.version) in seen:
            continue
        seen.add((c.url_key, c.version))
        for name in counter_names(c.outcome, c.event.get("status")):
            shards.append(key_shard(c.url_key))
            keys.append(c.url_key)
            versions.append(c.version + 1)
            names.append(name)
    if names:
        await conn.execute(_ADD_WRITTEN, shards, keys, versions, names, now)


async def read_counts(conn: Conn) -> EventCounts:
    rows = await conn.fetch("SELECT name, sum(n) FROM event_counts GROUP BY name")
    return EventCounts.from_counters((str(r[0]), int(r[1])) for r in rows)
