"""The compiled SimHash path gives the numpy path's fingerprint and word count for every
text, and the numpy path takes over when the kernels cannot be loaded."""

from __future__ import annotations

import random

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from courtier.dedup import simhash
from courtier.dedup.pages import DuplicateTracker
from courtier.dedup.simhash import simhash64, text_features
from tests.ci import required_under_ci

WORD_BYTES = [b for b in range(256) if b not in b" \t\n\r\x0b\x0c"]



@pytest.fixture
def needs_numba() -> None:
    """Skip when the kernels cannot be compiled (numba missing); under CI, fail."""
    if not simhash.prepare_compiled():
        required_under_ci("compiled SimHash unavailable (numba is not installed)")


def expected(text: str) -> tuple[int, int]:
    return simhash64(text), text_features(text)[1]


@pytest.mark.usefixtures("needs_numba")
def test_kernel_word_hashes_equal_xxhash_at_every_length() -> None:
    k = simhash.compiled_kernels()
    assert k is not None
    rng = random.Random(3)
    for length in range(1, 40):
        words = [bytes(rng.choice(WORD_BYTES) for _ in range(length)) for _ in range(30)]
        sep = b"  ".join(words)
        buf = np.frombuffer(sep + b" " * 9, dtype=np.uint8)
        out = np.empty(len(sep) // 2 + 1, dtype=np.uint64)
        long_at = np.empty((len(sep) // 18 + 1, 3), dtype=np.intp)
        count, longs = k.word_hashes(buf, len(sep), out, long_at)
        assert count == 30
        want = [xxhash.xxh3_64_intdigest(w) for w in words]
        if length <= k.SHORT:
            assert longs == 0 and out[:count].tolist() == want, length
        else:  # left to the caller: index, start and length of each such word
            assert longs == 30 and out[:count].tolist() == [0] * 30
            assert [sep[s:s + n] for _, s, n in long_at[:longs].tolist()] == words


@pytest.mark.usefixtures("needs_numba")
def test_word_counts_around_the_shingle_and_lane_edges() -> None:
    # 0-2 words (no shingles), and feature counts around the 255-feature lane flush
    rng = random.Random(5)
    vocab = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 12)))
             for _ in range(300)]
    for words in (0, 1, 2, 3, 4, 256, 257, 258, 511, 512, 766, 2000):
        text = " ".join(rng.choice(vocab) for _ in range(words))
        assert simhash.simhash_words(text) == expected(text) == (
            simhash64(text), words), words


@pytest.mark.usefixtures("needs_numba")
def test_all_votes_set_and_ties() -> None:
    # one word repeated: every shingle is the same feature, so every set bit wins
    text = " ".join(["same"] * 600)
    fp, words = simhash.simhash_words(text)
    assert (fp, words) == expected(text) and fp != 0
    # two features: a bit set in exactly one of them is a tie, which gives 0
    assert simhash.simhash_words("alpha beta") == expected("alpha beta")


@pytest.mark.usefixtures("needs_numba")
def test_long_words_unicode_and_separators() -> None:
    texts = ["", "   ", ",.;!", "x" * 17, "a " + "b" * 300 + " c", "Hello, World! ÉTÉ été",
             "中文字符的文本没有空格 " * 40, "tab\tnew\nline\rcr", "“quoted” — dash " * 100,
             "word " * 3 + "é" * 20, "\ud800 lone surrogate text here"]
    for text in texts:
        assert simhash.simhash_words(text) == expected(text), text[:30]


@pytest.mark.usefixtures("needs_numba")
@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aZ09_ ,.-!\n\té€—“中文 ")), max_size=600))
def test_random_texts_equal_the_numpy_path(text: str) -> None:
    assert simhash.simhash_words(text) == expected(text)


@pytest.mark.usefixtures("needs_numba")
@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=30),
                max_size=700))
def test_random_word_lists_of_every_length_class(words: list[str]) -> None:
    text = " ".join(words)
    assert simhash.simhash_words(text) == expected(text) == (simhash64(text), len(words))


def test_numpy_path_when_the_kernels_cannot_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simhash, "_kernels", False)
    assert simhash.compiled_kernels() is None and not simhash.prepare_compiled()
    text = "the numpy path gives the same fingerprint " * 5
    assert simhash.simhash_words(text) == expected(text)
    fp, twin = DuplicateTracker().fingerprint(b"\x02" * 16, text)
    assert fp == simhash64(text) and twin is None


def test_a_failing_import_falls_back_to_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_kernels(name: str, globals: object = None, locals: object = None,
                   fromlist: tuple[str, ...] | None = (), level: int = 0) -> object:
        if "_simhash_kernels" in name or "_simhash_kernels" in (fromlist or ()):
            raise ImportError("No module named 'numba'")
        return real_import(name, globals, locals, fromlist, level)  # type: ignore[arg-type]

    monkeypatch.setattr(simhash, "_kernels", None)
    monkeypatch.setattr(builtins, "__import__", no_kernels)
    assert simhash.compiled_kernels() is None
    monkeypatch.setattr(builtins, "__import__", real_import)
    assert simhash.simhash_words("one two three four") == expected("one two three four")


@pytest.mark.usefixtures("needs_numba")
def test_tracker_uses_the_same_fingerprints_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(9)
    texts = [" ".join(rng.choice(["red", "green", "blue", "sky", "sea", "word"])
                      for _ in range(rng.randint(0, 400))) for _ in range(30)]
    compiled = [DuplicateTracker().fingerprint(b"\x01" * 16, t) for t in texts]
    monkeypatch.setattr(simhash, "_kernels", False)
    assert [DuplicateTracker().fingerprint(b"\x01" * 16, t) for t in texts] == compiled
