"""How a read of the outbox by shard (``Store.read_events_by_shard``) splits its limit.

A store knows each shard's head: the highest position committed (its per-shard
counter, bumped in the writing transaction, so every position up to it is committed or
was never used). The read takes, of each shard with events above the cursor, a range
``(after, through]`` of positions: all of them when the backlogs fit in the limit,
otherwise a fair share (the smaller backlogs whole, the rest split evenly), so that one
busy shard does not starve the others. A range may hold fewer events than positions
(a position taken by an insert that conflicted and wrote nothing); the cursor moves to
``through`` all the same: no position up to the head can still commit.

The retention removes old events; each shard keeps the highest position removed
(``pruned``). A cursor below it in some shard would skip what was removed silently, so the
read is refused (:func:`check_unpruned`), naming the cursor to read on from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from courtier.core.errors import ShardEventsPruned
from courtier.core.shard_cursor import ShardCursor

__all__ = ["ShardRange", "advance", "check_unpruned", "plan_reads"]


@dataclass(frozen=True, slots=True)
class ShardRange:
    """The positions ``after < shard_pos <= through`` of one shard."""

    shard: int
    after: int
    through: int


def plan_reads(cursor: ShardCursor, heads: Mapping[int, int], limit: int) -> list[ShardRange]:
    """The ranges one read takes (at most ``limit`` positions in all), in shard order."""
    backlog = sorted((head - cursor.position(shard), shard) for shard, head in heads.items()
                     if head > cursor.position(shard))
    remaining = max(0, limit)
    ranges: list[ShardRange] = []
    for i, (behind, shard) in enumerate(backlog):
        left = len(backlog) - i
        take = min(behind, -(-remaining // left))
        if take <= 0:
            continue
        remaining -= take
        after = cursor.position(shard)
        ranges.append(ShardRange(shard, after, after + take))
    return sorted(ranges, key=lambda r: r.shard)


def advance(cursor: ShardCursor, ranges: list[ShardRange]) -> ShardCursor:
    """The cursor after reading ``ranges`` whole."""
    return cursor.advanced({r.shard: r.through for r in ranges})


def check_unpruned(cursor: ShardCursor, pruned: Mapping[int, int]) -> None:
    """Raise :class:`ShardEventsPruned` when ``cursor`` is below a shard's highest removed
    position (a cursor that never read a shard is below any removal in it)."""
    behind = {s: p for s, p in pruned.items() if p > cursor.position(s)}
    if behind:
        raise ShardEventsPruned(len(behind), cursor.advanced(behind).token())
