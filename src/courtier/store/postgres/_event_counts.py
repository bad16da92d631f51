"""The PostgreSQL side of the outbox tallies (``store/event_counts.py``, migrations 0014
and 0029).

The commit and the re-parse inserts add their events' counts in their own
transaction, to rows keyed ``(shard, name)`` of a shard they wrote (on Citus the table
is distributed by shard beside ``events``, so a commit writes the tallies on its own
shards' nodes only). On plain PostgreSQL ``courtier_commit`` inserts one fetch event
per applied commit (``ON CONFLICT DO NOTHING``), so after it :func:`add_commit_counts`
adds, in one statement and onto the batch's first shard, the counter names of the
batch's commits whose event this very transaction wrote (the unique index on ``(shard,
url_key, version)`` and the ``xid`` column; no payload is parsed). On Citus the routed
commit (``courtier_commit_routed``) adds each Citus shard's part's tallies to its own
shards' rows, from :func:`written_names`. A read sums every row of a name, whichever
shard holds it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from courtier.store.base import FetchCommit
from courtier.store.event_counts import EventCounts, counter_names
from courtier.store.postgres._rows import Conn, key_shard

#: plain PostgreSQL's commit, one round trip: the counter names of each commit whose
#: event this transaction wrote, summed by name onto one shard of the batch ($7, its
#: first). Each commit's event is looked up by its key (shard, url key, version), one
#: descent of the unique index of the commit's ``now`` ($5, the day partition it is
#: pruned to) a commit, and kept if the caller's transaction ($6) wrote it. No
#: ``e.shard = ANY(batch's shards)`` beside the join: as a second index condition of
#: the nested loop's inner scan PostgreSQL 15 descended the index once an array element
#: for each commit, batch² descents (40,000 for a batch of 200 over 200 shards; ~150
#: an event in a one-worker crawl). Each commit names its set of counter names ($4, an
#: index into the ($8, $9) pairs: a batch has a handful of distinct sets), so the
#: events are matched once a commit, not once a name, counted by set, and only those
#: few counts are expanded into names; a batch upserts one row a name instead of one a
#: (shard, name): ~4 rows instead of ~370 for a batch of 136 pages over 1,024 shards.
_ADD_WRITTEN = (
    "INSERT INTO event_counts AS c (shard, name, n)"
    " SELECT $7::integer, ns.name, sum(w.n)"
    " FROM (SELECT k.name_set, count(*) AS n"
    "       FROM unnest($1::integer[], $2::bytea[], $3::integer[], $4::integer[])"
    "       AS k(shard, url_key, version, name_set)"
    "       JOIN events e ON e.shard = k.shard AND e.url_key = k.url_key"
    "        AND e.version = k.version"
    "       WHERE e.xid = $6::xid8 AND e.created_at = $5"
    "       GROUP BY k.name_set) AS w"
    " JOIN unnest($8::integer[], $9::text[]) AS ns(name_set, name)"
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


def _applicable(commits: Sequence[FetchCommit]) -> list[FetchCommit]:
    """The commits whose fetch event can be written: a key repeated at one version, only
    the first of them can apply (at consecutive versions each applies, in batch order,
    and writes its own event)."""
    seen: set[tuple[bytes, int]] = set()
    out: list[FetchCommit] = []
    for c in commits:
        if (c.url_key, c.version) not in seen:
            seen.add((c.url_key, c.version))
            out.append(c)
    return out


def written_names(commits: Sequence[FetchCommit]
                  ) -> tuple[list[int], list[bytes], list[int], list[str]]:
    """The counter names each commit's fetch event would add, as (shards, url keys,
    versions of the event, names): what the Citus commit, ``courtier_commit_routed``,
    joins with the events it wrote (one row a name, each shard's tallies on its own)."""
    shards: list[int] = []
    keys: list[bytes] = []
    versions: list[int] = []
    names: list[str] = []
    for c in _applicable(commits):
        for name in counter_names(c.outcome, c.event.get("status")):
            shards.append(key_shard(c.url_key))
            keys.append(c.url_key)
            versions.append(c.version + 1)
            names.append(name)
    return shards, keys, versions, names


async def add_commit_counts(conn: Conn, commits: Sequence[FetchCommit], now: float,
                            xid: object) -> None:
    """After ``courtier_commit`` in the same transaction on plain PostgreSQL (``xid``:
    its ``pg_current_xact_id()``): count the events it wrote (their ``created_at`` is the
    commit's ``now``, which confines the join to that day's partition of the outbox,
    migration time_partitions)."""
    applicable = _applicable(commits)
    if not applicable:
        return
    set_ids: dict[tuple[str, ...], int] = {}
    name_sets = [set_ids.setdefault(counter_names(c.outcome, c.event.get("status")),
                                    len(set_ids)) for c in applicable]
    shards = [key_shard(c.url_key) for c in applicable]
    pair_ids = [i for names, i in set_ids.items() for _ in names]
    pair_names = [name for names in set_ids for name in names]
    await conn.execute(_ADD_WRITTEN, shards, [c.url_key for c in applicable],
                       [c.version + 1 for c in applicable], name_sets, now, xid,
                       min(shards), pair_ids, pair_names)


async def read_counts(conn: Conn) -> EventCounts:
    rows = await conn.fetch("SELECT name, sum(n) FROM event_counts GROUP BY name")
    return EventCounts.from_counters((str(r[0]), int(r[1])) for r in rows)
