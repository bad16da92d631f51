"""The PostgreSQL side of the outbox tallies (``store/event_counts.py``, migrations 0014
and 0029).

The commit and the re-parse inserts add their events' counts in their own
transaction, to the rows of the events' shards (``(shard, name)``: on Citus the table
is distributed by shard beside ``events``, so a commit writes the tallies on its own
shards' nodes only). ``courtier_commit`` inserts one fetch event per applied commit
(``ON CONFLICT DO NOTHING``), so after it :func:`add_commit_counts` adds, in one
statement, the counter names of the batch's commits whose event this very
transaction wrote (the unique index on ``(shard, url_key, version)`` and the ``xid``
column, compared with the transaction id the caller read on the coordinator; no
payload is parsed). A read sums the shards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from courtier.store.base import FetchCommit
from courtier.store.event_counts import EventCounts, counter_names
from courtier.store.postgres._rows import Conn, key_shard

#: one round trip: the counter names of each commit whose event this transaction wrote.
#: The events are read on their shards only ($7, the batch's shards: on Citus each node
#: of the batch counts its own, and no other node takes part), and the transaction id is
#: the caller's ($6: on Citus a ``pg_current_xact_id()`` in a statement routed to a
#: worker node would be that node's own, not the coordinator's that stamped the events)
_ADD_WRITTEN = (
    "INSERT INTO event_counts AS c (shard, name, n)"
    " SELECT e.shard, k.name, count(*)"
    " FROM unnest($1::integer[], $2::bytea[], $3::integer[], $4::text[])"
    " AS k(shard, url_key, version, name)"
    " JOIN events e ON e.shard = k.shard AND e.url_key = k.url_key AND e.version = k.version"
    " WHERE e.shard = ANY($7::integer[]) AND e.xid = $6::xid8 AND e.created_at = $5"
    " GROUP BY e.shard, k.name ORDER BY e.shard, k.name"
    " ON CONFLICT (shard, name) DO UPDATE SET n = c.n + excluded.n"
)
_ADD = (
    "INSERT INTO event_counts AS c (shard, name, n)"
    " SELECT shard, name, n FROM unnest($1::integer[], $2::text[], $3::bigint[])"
    " AS t(shard, name, n) ORDER BY shard, name"
    " ON CONFLICT (shard, name) DO UPDATE SET n = c.n + excluded.n"
)


async def add_counts(conn: Conn, counts: Mapping[tuple[int, str], int]) -> None:
    """Add ``counts``, keyed by (shard, counter name)."""
    keys = sorted(key for key, n in counts.items() if n)
    if keys:
        await conn.execute(_ADD, [s for s, _ in keys], [name for _, name in keys],
                           [counts[key] for key in keys])


def written_names(commits: Sequence[FetchCommit]
                  ) -> tuple[list[int], list[bytes], list[int], list[str]]:
    """The counter names each commit's fetch event would add, as (shards, url keys,
    versions of the event, names): what :func:`add_commit_counts` joins with the events
    its transaction wrote (and the Citus commit, ``courtier_commit_routed``, with its)."""
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
    return shards, keys, versions, names


async def add_commit_counts(conn: Conn, commits: Sequence[FetchCommit], now: float,
                            xid: object) -> None:
    """After ``courtier_commit`` in the same transaction (``xid``: its
    ``pg_current_xact_id()``): count the events it wrote (their ``created_at`` is the
    commit's ``now``, which confines the join to that day's partition of the outbox,
    migration time_partitions)."""
    shards, keys, versions, names = written_names(commits)
    if names:
        await conn.execute(_ADD_WRITTEN, shards, keys, versions, names, now, xid,
                           sorted(set(shards)))


async def read_counts(conn: Conn) -> EventCounts:
    rows = await conn.fetch("SELECT name, sum(n) FROM event_counts GROUP BY name")
    return EventCounts.from_counters((str(r[0]), int(r[1])) for r in rows)
