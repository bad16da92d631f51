"""The PostgreSQL side of the outbox tallies (``store/event_counts.py``, migrations 0014
and 0029).

The commit and the re-parse inserts add their events' counts in their own
transaction, to rows keyed ``(shard, name)`` of a shard they wrote (on Citus the table
is distributed by shard beside ``events``, so a commit writes the tallies on one of its
own shards' nodes only). ``courtier_commit`` inserts one fetch event per applied commit
(``ON CONFLICT DO NOTHING``), so after it :func:`add_commit_counts` adds, in one
statement and onto the batch's first shard, the counter names of the batch's commits
whose event this very transaction wrote (the unique index on ``(shard, url_key,
version)`` and the ``xid`` column, compared with the transaction id the caller read on
the coordinator; no payload is parsed). A read sums every row of a name, whichever
shard holds it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from courtier.store.base import FetchCommit
from courtier.store.event_counts import EventCounts, counter_names
from courtier.store.postgres._rows import Conn, key_shard

#: one round trip: the counter names of each commit whose event this transaction wrote,
#: summed by name onto one shard of the batch ($8, its first). The events are read on
#: their shards only ($7, the batch's shards: on Citus each node of the batch reads its
#: own, and the tallies go to a node of the batch, so no other node takes part), and the
#: transaction id is the caller's ($6: on Citus a ``pg_current_xact_id()`` in a statement
#: routed to a worker node would be that node's own, not the coordinator's that stamped
#: the events). Each commit names its set of counter names ($4, an index into the
#: ($9, $10) pairs: a batch has a handful of distinct sets), so the events are matched
#: once a commit, not once a name, counted by set, and only those few counts are
#: expanded into names; a batch upserts one row a name instead of one a (shard, name):
#: ~4 rows instead of ~370 for a batch of 136 pages over 1,024 shards.
_ADD_WRITTEN = (
    "INSERT INTO event_counts AS c (shard, name, n)"
    " SELECT $8::integer, ns.name, sum(w.n)"
    " FROM (SELECT k.name_set, count(*) AS n"
    "       FROM unnest($1::integer[], $2::bytea[], $3::integer[], $4::integer[])"
    "       AS k(shard, url_key, version, name_set)"
    "       JOIN events e ON e.shard = k.shard AND e.url_key = k.url_key"
    "        AND e.version = k.version"
    "       WHERE e.shard = ANY($7::integer[]) AND e.xid = $6::xid8 AND e.created_at = $5"
    "       GROUP BY k.name_set) AS w"
    " JOIN unnest($9::integer[], $10::text[]) AS ns(name_set, name)"
    " ON ns.name_set = w.name_set"
    " GROUP BY ns.name ORDER BY ns.name"
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


async def add_commit_counts(conn: Conn, commits: Sequence[FetchCommit], now: float,
                            xid: object) -> None:
    """After ``courtier_commit`` in the same transaction (``xid``: its
    ``pg_current_xact_id()``): count the events it wrote (their ``created_at`` is the
    commit's ``now``, which confines the join to that day's partition of the outbox,
    migration time_partitions)."""
    shards: list[int] = []
    keys: list[bytes] = []
    versions: list[int] = []
    name_sets: list[int] = []
    set_ids: dict[tuple[str, ...], int] = {}
    seen: set[tuple[bytes, int]] = set()
    for c in commits:
        # a key repeated at one version: only the first of them can apply (at consecutive
        # versions each applies, in batch order, and writes its own event)
        if (c.url_key, c.version) in seen:
            continue
        seen.add((c.url_key, c.version))
        names = counter_names(c.outcome, c.event.get("status"))
        shards.append(key_shard(c.url_key))
        keys.append(c.url_key)
        versions.append(c.version + 1)
        name_sets.append(set_ids.setdefault(names, len(set_ids)))
    if not keys:
        return
    pair_ids = [i for names, i in set_ids.items() for _ in names]
    pair_names = [name for names in set_ids for name in names]
    wanted = sorted(set(shards))
    await conn.execute(_ADD_WRITTEN, shards, keys, versions, name_sets, now, xid, wanted,
                       wanted[0], pair_ids, pair_names)


async def read_counts(conn: Conn) -> EventCounts:
    rows = await conn.fetch("SELECT name, sum(n) FROM event_counts GROUP BY name")
    return EventCounts.from_counters((str(r[0]), int(r[1])) for r in rows)
