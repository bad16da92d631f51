"""The per-shard cursor and its token form (core/shard_cursor.py).

Seen red: with the token's shards written absolute instead of as differences the
round-trip held but the 1,024-shard token grew to 5,315 characters (1,918 now); with
``advanced`` taking the given position even when lower, the never-back test failed."""

from __future__ import annotations

import pytest

from courtier.core.errors import ConfigError
from courtier.core.shard_cursor import TOKEN_PREFIX, ShardCursor


def test_token_round_trips_any_cursor() -> None:
    for positions in ({}, {0: 1}, {3: 7, 1: 2**40, 1023: 5}, {s: s * 977 + 1 for s in range(1024)}):
        cursor = ShardCursor(positions)
        token = cursor.token()
        assert token.startswith(TOKEN_PREFIX)
        assert ShardCursor.from_token(token) == cursor
        assert token.isascii() and " " not in token and "+" not in token and "/" not in token


def test_token_of_every_shard_near_a_million_is_compact() -> None:
    cursor = ShardCursor({s: 1_000_000 + s * 13 for s in range(1024)})
    assert len(cursor.token()) < 3_000  # 1,918 now


def test_positions_never_move_back_and_zero_is_absent() -> None:
    cursor = ShardCursor({1: 5, 2: 0})
    assert dict(cursor) == {1: 5} and cursor.position(2) == 0
    moved = cursor.advanced({1: 3, 4: 9})
    assert dict(moved) == {1: 5, 4: 9}
    assert moved.covers(cursor) and not cursor.covers(moved)


@pytest.mark.parametrize("token", ["", "x1.abc", "c1.!!!", "c1.AAAA", "c2." + "A" * 8])
def test_a_damaged_or_foreign_token_is_refused_by_name(token: str) -> None:
    with pytest.raises(ConfigError, match="cursor token"):
        ShardCursor.from_token(token)


def test_negative_positions_are_refused() -> None:
    with pytest.raises(ValueError):
        ShardCursor({1: -1})
