"""SimHashIndex: exhaustive agreement with brute force, planted near-duplicates, limits."""

from __future__ import annotations

import random

import numpy as np
import pytest

from courtier.core.errors import ConfigError
from courtier.dedup.simhash import hamming
from courtier.dedup.simhash_index import SimHashIndex


def _flip(fp: int, bits: list[int]) -> int:
    for b in bits:
        fp ^= 1 << b
    return fp


def _brute(fps: np.ndarray, q: int, d: int) -> list[tuple[int, int]]:
    dist = np.bitwise_count(fps ^ np.uint64(q))
    hits = [(int(i), int(dist[i])) for i in np.flatnonzero(dist <= d)]
    return sorted(hits, key=lambda p: (p[1], p[0]))


def _corpus(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    fps = [rng.getrandbits(64) for _ in range(n)]
    # clusters of near-duplicates at every distance 0..6, flips spread over all blocks
    for i in range(n // 4):
        base = fps[i]
        fps.append(_flip(base, rng.sample(range(64), rng.randint(0, 6))))
    return fps


@pytest.mark.parametrize(
    ("max_distance", "blocks"), [(3, None), (3, 5), (3, 6), (0, None), (1, None), (5, None)]
)
def test_near_matches_brute_force_exhaustively(max_distance: int, blocks: int | None) -> None:
    fps = _corpus(max_distance * 10 + (blocks or 0), 1200)
    idx = SimHashIndex(max_distance, blocks)
    for i, fp in enumerate(fps):
        idx.add(fp, i)
    assert len(idx) == len(fps)
    arr = np.array(fps, dtype=np.uint64)
    for q in fps:  # every stored fingerprint as a query
        assert idx.near(q) == _brute(arr, q, max_distance)


def test_planted_duplicates_found_at_0_to_3_and_not_at_4() -> None:
    rng = random.Random(11)
    idx = SimHashIndex(3)
    background = [rng.getrandbits(64) for _ in range(5000)]
    idx.add_many(background, range(len(background)))
    query = rng.getrandbits(64)
    planted: dict[int, int] = {}
    for distance in range(5):
        for trial in range(20):
            # flips inside one block, across blocks, at block borders
            bits = rng.sample(range(64), distance) if trial else list(range(15, 15 + distance))
            item = 100_000 + distance * 100 + trial
            planted[item] = distance
            idx.add(_flip(query, bits), item)
    found = dict(idx.near(query))
    for item, distance in planted.items():
        if distance <= 3:
            assert found.get(item) == distance
        else:
            assert item not in found
    assert set(found) <= set(planted) | {
        i for i, f in enumerate(background) if hamming(f, query) <= 3
    }


def test_pending_and_merged_entries_are_both_searched() -> None:
    rng = random.Random(5)
    fps = [rng.getrandbits(64) for _ in range(10_000)]
    idx = SimHashIndex()
    for i, fp in enumerate(fps):
        idx.add(fp, i)  # crosses the merge threshold: part merged, part pending
    probe = _flip(fps[-1], [0, 40])
    early = _flip(fps[0], [63])
    assert (len(fps) - 1, 2) in idx.near(probe)
    assert (0, 1) in idx.near(early)
    idx.flush()
    assert (len(fps) - 1, 2) in idx.near(probe)
    assert (0, 1) in idx.near(early)


def test_add_many_equals_add() -> None:
    fps = _corpus(2, 400)
    one, many = SimHashIndex(), SimHashIndex()
    for i, fp in enumerate(fps):
        one.add(fp, i)
    many.add_many(fps, range(len(fps)))
    for q in fps[:200]:
        assert one.near(q) == many.near(q)


def test_duplicate_entries_and_ids() -> None:
    idx = SimHashIndex()
    idx.add(42, 1)
    idx.add(42, 1)
    idx.add(43, -7)
    assert idx.near(42) == [(1, 0), (1, 0), (-7, 1)]
    assert len(idx) == 3


def test_empty_index_and_extreme_values() -> None:
    idx = SimHashIndex()
    assert idx.near(0) == []
    top = (1 << 64) - 1
    idx.add(top, 9)
    idx.flush()
    assert idx.near(top ^ 0b111) == [(9, 3)]
    assert idx.near(top ^ 0b1111) == []


def test_table_count_follows_block_choice() -> None:
    assert SimHashIndex(3).tables == 4
    assert SimHashIndex(3, blocks=5).tables == 10
    assert SimHashIndex(3, blocks=6).tables == 20


def test_memory_per_item_is_small() -> None:
    idx = SimHashIndex()
    idx.add_many(range(0, 100_000 * 977, 977), range(100_000))
    assert idx.memory_bytes() / len(idx) <= 48


@pytest.mark.parametrize(("d", "k"), [(-1, None), (32, None), (3, 3), (3, 65)])
def test_bad_parameters(d: int, k: int | None) -> None:
    with pytest.raises(ConfigError):
        SimHashIndex(d, k)


def test_bad_values_rejected() -> None:
    idx = SimHashIndex()
    with pytest.raises(ValueError):
        idx.add(1 << 64, 1)
    with pytest.raises(ValueError):
        idx.add(-1, 1)
    with pytest.raises(ValueError):
        idx.add(1, 1 << 63)
    with pytest.raises(ValueError):
        idx.near(-5)
    with pytest.raises(ValueError):
        idx.add_many([1, 2], [1])
