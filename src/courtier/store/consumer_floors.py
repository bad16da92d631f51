"""What per-shard consumers hold back: each shard's *floor*, the lowest position any
registered per-shard consumer has read in it (docs/scale-out.md, "Named consumers by
shard").

A per-shard consumer's cursor (a :class:`ShardCursor`) reads a shard it never named from
the shard's first event, so a shard absent from one consumer's cursor has floor 0: none
of its events may be removed. :func:`floors` is ``None`` when no per-shard consumer is
registered (nothing is held back by shard). The retention of every store removes an event
only when :func:`holds` is false for it (and the crawl-wide rules allow it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from courtier.core.shard_cursor import ShardCursor

__all__ = ["floors", "floors_json", "holds"]


def floors(cursors: Iterable[ShardCursor]) -> dict[int, int] | None:
    """Shard → the lowest position read there by any of ``cursors`` (shards every
    cursor has read, with a position above 0); None when there is no cursor."""
    listed = list(cursors)
    if not listed:
        return None
    shards = set.intersection(*(set(c) for c in listed))
    return {s: min(c.position(s) for c in listed) for s in sorted(shards)}


def holds(shard_floors: Mapping[int, int] | None, shard: int, shard_pos: int) -> bool:
    """True when a per-shard consumer has not read the event ``(shard, shard_pos)`` yet."""
    return shard_floors is not None and shard_pos > shard_floors.get(shard, 0)


def floors_json(shard_floors: Mapping[int, int] | None) -> str | None:
    """The floors as a JSON object (keys the shards as text) for a SQL filter
    ``shard_pos <= coalesce((floors ->> shard::text)::bigint, 0)``; None: no filter."""
    return None if shard_floors is None else json.dumps(
        {str(s): p for s, p in shard_floors.items()})
