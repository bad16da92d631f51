"""How a read by shard splits its limit (store/shard_reads.py).

Seen red: with the whole limit given to the first shard behind, the sharing test failed
(and the contract's, tests/contract/test_shard_cursor_contract.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from courtier.core.shard_cursor import ShardCursor
from courtier.store.shard_reads import ShardRange, advance, plan_reads


def test_backlogs_that_fit_are_read_whole() -> None:
    ranges = plan_reads(ShardCursor({1: 3}), {1: 5, 2: 4, 3: 0}, 100)
    assert ranges == [ShardRange(1, 3, 5), ShardRange(2, 0, 4)]
    assert advance(ShardCursor({1: 3}), ranges) == ShardCursor({1: 5, 2: 4})


def test_the_limit_is_shared_smaller_backlogs_first() -> None:
    ranges = plan_reads(ShardCursor(), {1: 100, 2: 2, 3: 100}, 10)
    assert [(r.shard, r.through - r.after) for r in ranges] == [(1, 4), (2, 2), (3, 4)]


def test_a_limit_below_the_shards_behind_still_reads() -> None:
    ranges = plan_reads(ShardCursor(), {s: 10 for s in range(5)}, 2)
    assert sum(r.through - r.after for r in ranges) == 2
    assert plan_reads(ShardCursor(), {1: 5}, 0) == []


@given(st.dictionaries(st.integers(0, 40), st.integers(0, 50), max_size=12),
       st.dictionaries(st.integers(0, 40), st.integers(0, 60), max_size=12),
       st.integers(0, 80))
def test_plans_take_at_most_the_limit_and_all_when_it_fits(
        cursor: dict[int, int], heads: dict[int, int], limit: int) -> None:
    start = ShardCursor(cursor)
    ranges = plan_reads(start, heads, limit)
    behind = sum(max(0, h - start.position(s)) for s, h in heads.items())
    taken = sum(r.through - r.after for r in ranges)
    assert taken == min(limit, behind)
    for r in ranges:
        assert r.after == start.position(r.shard) < r.through <= heads[r.shard]
