"""The vectorised word hashes equal the xxhash package's xxh3_64 word by word, and
SimHash's one-pass features equal the word-list definition."""

from __future__ import annotations

import random

import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from courtier.dedup.simhash import (
    shingle_hashes,
    simhash64,
    simhash_from_features,
    text_features,
    tokenize,
)
from courtier.dedup.word_hashes import FEW, word_hashes

WORD_BYTES = [b for b in range(256) if b not in b" \t\n\r\x0b\x0c"]


def reference(separated: bytes) -> list[int]:
    return [xxhash.xxh3_64_intdigest(w) for w in separated.split()]


def test_every_word_length_matches_xxhash() -> None:
    rng = random.Random(7)
    for length in range(1, 70):
        words = [bytes(rng.choice(WORD_BYTES) for _ in range(length)) for _ in range(40)]
        text = b" " + b"  ".join(words) + b" x"
        assert word_hashes(text).tolist() == reference(text), length


def test_few_and_many_words_outside_4_to_8_bytes_match_xxhash() -> None:
    # up to FEW such words are hashed one by one, more take the vectorised paths
    rng = random.Random(11)
    for odd in (0, 1, FEW, FEW + 1, 3 * FEW):
        for common in (0, 1, 200):
            words = [bytes(rng.choice(WORD_BYTES) for _ in range(rng.choice((1, 2, 3, 9, 16, 17))))
                     for _ in range(odd)]
            words += [bytes(rng.choice(WORD_BYTES) for _ in range(rng.randint(4, 8)))
                      for _ in range(common)]
            rng.shuffle(words)
            text = b"  ".join(words)
            assert word_hashes(text).tolist() == reference(text), (odd, common)


def test_edges_empty_and_single_words() -> None:
    assert word_hashes(b"").tolist() == []
    assert word_hashes(b"    ").tolist() == []
    for text in [b"a", b"ab", b"abc", b"abcd", b"abcdefgh", b"abcdefghi", b"a" * 16,
                 b"a" * 17, b"\xff" * 9, b"x" * 5000]:
        assert word_hashes(text).tolist() == reference(text), text[:20]


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_with_spaces_as_separators(raw: bytes) -> None:
    separated = bytes(0x20 if b in b"\t\n\r\x0b\x0c" else b for b in raw)
    assert word_hashes(separated).tolist() == reference(separated)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aZ09_ ,.-!\n\té€—“中文 ")), max_size=400))
def test_text_features_equal_the_word_list_definition(text: str) -> None:
    features, count = text_features(text)
    words = tokenize(text)
    assert count == len(words)
    assert features.tolist() == shingle_hashes(words).tolist()
    assert simhash64(text) == simhash_from_features(shingle_hashes(words))
