"""SimHash fingerprints: definition (against a pure-Python reference), similarity, storage."""

from __future__ import annotations

import random

import numpy as np
import pytest
import xxhash

from courtier.dedup.simhash import (
    MASK64,
    from_signed64,
    hamming,
    simhash64,
    simhash_from_features,
    to_signed64,
    tokenize,
)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & MASK64


def reference_simhash(text: str) -> int:
    """The module contract written out bit by bit, with Python ints only."""
    words = (
        text.lower()
        .encode("utf-8")
        .translate(
            bytes(
                c if (chr(c).isascii() and (chr(c).isalnum() or c == 0x5F)) or c >= 0x80 else 0x20
                for c in range(256)
            )
        )
        .split()
    )
    hashes = [xxhash.xxh3_64_intdigest(w) for w in words]
    if len(hashes) >= 3:
        feats = []
        for a, b, c in zip(hashes, hashes[1:], hashes[2:], strict=False):
            x = (a * 0x9E3779B97F4A7C15) & MASK64
            x ^= _rotl(b, 21)
            x ^= _rotl(c, 42)
            x ^= x >> 30
            x = (x * 0xBF58476D1CE4E5B9) & MASK64
            x ^= x >> 27
            x = (x * 0x94D049BB133111EB) & MASK64
            x ^= x >> 31
            feats.append(x)
    else:
        feats = hashes
    return reference_votes(feats)


def reference_votes(feats: list[int]) -> int:
    """Steps 4-5: bit j is set when more than half of the features have it."""
    out = 0
    for bit in range(64):
        votes = sum(1 if (f >> bit) & 1 else -1 for f in feats)
        if votes > 0:
            out |= 1 << bit
    return out


def _random_text(rng: random.Random, words: int) -> str:
    vocab = ["alpha", "beta", "Gamma", "delta", "épée", "naïve", "x1", "foo_bar", "z"]
    vocab += [f"w{i}" for i in range(300)]
    return " ".join(rng.choice(vocab) + rng.choice(["", ",", ".", "!", " -"]) for _ in range(words))


@pytest.mark.parametrize("seed", range(8))
def test_matches_pure_python_reference(seed: int) -> None:
    rng = random.Random(seed)
    text = _random_text(rng, rng.choice([1, 2, 3, 4, 50, 700]))
    assert simhash64(text) == reference_simhash(text)


@pytest.mark.parametrize("n", [1, 2, 3, 254, 255, 256, 509, 510, 511, 2000])
def test_vote_counts_across_the_255_feature_lanes(n: int) -> None:
    # the votes are summed 255 features at a time in byte lanes: edges of those blocks,
    # random features, and all-ones / ties that would show a carry between lanes
    rng = random.Random(n)
    cases = [[rng.getrandbits(64) for _ in range(n)], [MASK64] * n,
             [MASK64] * (n // 2) + [0] * (n - n // 2),
             [rng.choice((MASK64, 0x8000000000000001, 1 << 63)) for _ in range(n)]]
    for feats in cases:
        assert simhash_from_features(np.array(feats, dtype=np.uint64)) == reference_votes(feats)


def test_empty_and_wordless_text_is_zero() -> None:
    assert simhash64("") == 0
    assert simhash64("  ,.;!? -- ") == 0


def test_tokens_ignore_case_and_ascii_punctuation() -> None:
    assert tokenize("Hello, WORLD!  foo_bar-42 Épée") == [
        b"hello",
        b"world",
        b"foo_bar",
        b"42",
        "épée".encode(),
    ]
    assert simhash64("Hello, World! How are you?") == simhash64("hello world how are you")


def test_shingles_are_order_sensitive() -> None:
    assert simhash64("one two three") != simhash64("three two one")
    # with one or two words the features are the word hashes themselves (order-free)
    assert simhash64("a b") == simhash64("b a")


def test_single_word_fingerprint_is_its_hash() -> None:
    assert simhash64("Word") == xxhash.xxh3_64_intdigest(b"word")


def test_frequency_weighting_changes_the_vote() -> None:
    base = "red green blue yellow"
    assert simhash64(base) != simhash64(base + " red green blue" * 5)


def test_near_identical_pages_are_close_and_different_pages_far() -> None:
    rng = random.Random(7)
    page = _random_text(rng, 2000)
    words = page.split()
    words[1000] = "changedword"
    edited = " ".join(words)
    other = _random_text(random.Random(8), 2000)
    a, b, c = simhash64(page), simhash64(edited), simhash64(other)
    assert hamming(a, b) <= 3
    assert hamming(a, c) > 10


def test_values_are_unsigned_64_bit() -> None:
    rng = random.Random(3)
    values = [simhash64(_random_text(rng, 30)) for _ in range(50)]
    assert all(0 <= v <= MASK64 for v in values)
    assert any(v >= 1 << 63 for v in values)  # the top bit is used


def test_hamming() -> None:
    assert hamming(0, 0) == 0
    assert hamming(0, MASK64) == 64
    assert hamming(0b1011, 0b0001) == 2
    assert hamming(to_signed64(MASK64), 0) == 64  # signed input is masked


@pytest.mark.parametrize(
    ("unsigned", "signed"),
    [(0, 0), (1, 1), ((1 << 63) - 1, (1 << 63) - 1), (1 << 63, -(1 << 63)), (MASK64, -1)],
)
def test_signed_round_trip(unsigned: int, signed: int) -> None:
    assert to_signed64(unsigned) == signed
    assert from_signed64(signed) == unsigned


def test_signed_conversion_rejects_out_of_range() -> None:
    with pytest.raises(ValueError):
        to_signed64(-1)
    with pytest.raises(ValueError):
        to_signed64(1 << 64)
    with pytest.raises(ValueError):
        from_signed64(1 << 63)


def test_signed_values_fit_sqlite() -> None:
    import sqlite3

    con = sqlite3.connect(":memory:")
    con.execute("create table t (v integer)")
    fp = simhash64("some page text that is long enough to set the high bit maybe")
    fp |= 1 << 63
    con.execute("insert into t values (?)", (to_signed64(fp),))
    (stored,) = con.execute("select v from t").fetchone()
    assert from_signed64(stored) == fp
