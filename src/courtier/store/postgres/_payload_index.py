"""The payload index rows of a Citus commit, written after it (docs/scale-out.md, "A
commit batch without two-phase commit").

``payloads`` is distributed by digest, so a batch's index rows sit on any node: inside
the commit's transaction they would make every batch a two-phase commit over several
nodes. On Citus the commit (``courtier_commit_routed``) writes none and returns the
batch rows whose payload the index must get: the rows it applied and those an earlier
try of the same commit applied (the URL row at the commit's version, referencing its
WARC record). :func:`index_payloads` then writes them, one statement per Citus shard of
``payloads``, each outside any transaction (a single-task router INSERT, committed on
its node alone).

What that keeps, and what it gives up: a row is indexed only once the commit that
references its WARC record has committed (never a location of a fetch that did not
commit, as on plain PostgreSQL); a failure between the commit and these statements
raises from ``commit``, and the caller's retry (stale by then) writes the rows it
finds applied, first copy kept (``ON CONFLICT DO NOTHING``). A crash with no retry
leaves those digests out of the index: a later copy of the same payload is archived
in full instead of as a revisit record, and nothing else reads the index.
"""

from __future__ import annotations

from collections.abc import Sequence

from courtier.store.base import FetchCommit
from courtier.store.postgres._rows import Conn, key_shard

_CITUS_SHARD = ("SELECT d, get_shard_id_for_distribution_column('payloads', d)"
                " FROM unnest($1::text[]) AS d")
_INDEX = ("SELECT courtier_index_payloads($1::text[], $2::text[], $3::bigint[], $4::text[],"
          " $5::double precision[])")


def first_copies(commits: Sequence[FetchCommit], ords: Sequence[int]) -> list[FetchCommit]:
    """The commits ``ords`` (places in ``commits``) in the order the plain form inserts
    their index rows — by round (a key's n-th commit of the batch in round n), then shard
    and key — keeping the first of each digest."""
    nth: dict[bytes, int] = {}
    rounds: list[int] = []
    for c in commits:
        nth[c.url_key] = nth.get(c.url_key, 0) + 1
        rounds.append(nth[c.url_key])
    chosen = sorted(set(ords), key=lambda i: (rounds[i], key_shard(commits[i].url_key),
                                             commits[i].url_key))
    kept: dict[str, FetchCommit] = {}
    for i in chosen:
        digest = commits[i].payload_digest
        if digest and digest not in kept:
            kept[digest] = commits[i]
    return list(kept.values())


async def index_payloads(conn: Conn, commits: Sequence[FetchCommit]) -> None:
    """Write the index rows of ``commits`` (each with a digest and a WARC record), one
    statement per Citus shard of ``payloads`` in Citus shard order; call outside a
    transaction."""
    if not commits:
        return
    shard_of = dict(await conn.fetch(_CITUS_SHARD, [c.payload_digest for c in commits]))
    groups: dict[int, list[FetchCommit]] = {}
    for c in commits:
        groups.setdefault(int(shard_of[c.payload_digest]), []).append(c)
    for _, group in sorted(groups.items()):
        await conn.execute(_INDEX, [c.payload_digest for c in group],
                           [c.warc_file for c in group], [c.warc_offset for c in group],
                           [c.url for c in group], [c.fetched_at for c in group])
