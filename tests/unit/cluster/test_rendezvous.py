"""Weighted rendezvous hashing: balance, determinism and minimal movement."""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from courtier.cluster.rendezvous import owner_of, score, target_owners
from courtier.core.urls import SHARD_COUNT

SHARDS = range(SHARD_COUNT)


def workers(n: int) -> dict[str, float]:
    return {f"w{i}": 1.0 for i in range(n)}


def test_equal_weights_spread_evenly() -> None:
    owners = target_owners(SHARDS, workers(4))
    counts = {w: sum(1 for o in owners.values() if o == w) for w in workers(4)}
    assert sum(counts.values()) == SHARD_COUNT
    # Expected 256 each; a binomial sd of ~14 makes ±60 a 4-sigma band.
    assert all(196 <= c <= 316 for c in counts.values()), counts


def test_share_follows_weight() -> None:
    owners = target_owners(SHARDS, {"big": 3.0, "small": 1.0})
    big = sum(1 for o in owners.values() if o == "big")
    assert 700 <= big <= 836, big  # expected 768


def test_join_moves_about_one_nth_all_to_the_newcomer() -> None:
    before = target_owners(SHARDS, workers(3))
    after = target_owners(SHARDS, workers(4))
    moved = [s for s in SHARDS if before[s] != after[s]]
    assert {after[s] for s in moved} == {"w3"}
    assert 0.15 * SHARD_COUNT <= len(moved) <= 0.35 * SHARD_COUNT, len(moved)


def test_leave_moves_only_the_leavers_shards() -> None:
    before = target_owners(SHARDS, workers(4))
    survivors = workers(4)
    del survivors["w1"]
    after = target_owners(SHARDS, survivors)
    for shard in SHARDS:
        if before[shard] != "w1":
            assert after[shard] == before[shard]
        else:
            assert after[shard] != "w1"


@settings(max_examples=50, deadline=None)
@given(
    st.dictionaries(
        st.text("abcdefgh", min_size=1, max_size=6),
        st.floats(0.1, 10.0),
        min_size=1,
        max_size=6,
    ),
    st.integers(0, SHARD_COUNT - 1),
)
def test_owner_is_the_highest_score_and_independent_of_order(
    weights: dict[str, float], shard: int
) -> None:
    owner = owner_of(shard, weights)
    assert owner is not None
    best = max(score(w, shard, c) for w, c in weights.items())
    assert score(owner, shard, weights[owner]) == best
    assert owner_of(shard, dict(reversed(list(weights.items())))) == owner


def test_zero_weight_and_no_workers_own_nothing() -> None:
    assert target_owners(SHARDS, {}) == {}
    assert target_owners(range(4), {"idle": 0.0}) == {}
    assert set(target_owners(range(64), {"idle": 0.0, "busy": 1.0}).values()) == {"busy"}


def test_stable_across_processes() -> None:
    here = target_owners(range(32), workers(3))
    code = (
        "from courtier.cluster.rendezvous import target_owners;"
        "print(sorted(target_owners(range(32), {'w0':1.0,'w1':1.0,'w2':1.0}).items()))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()
    assert out == str(sorted(here.items()))
