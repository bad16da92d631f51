"""The numba kernels of the compiled SimHash path (``dedup/simhash.py`` loads them).

Importing this module imports numba and registers the kernels; numba compiles them at
their first call, or loads the machine code it cached beside this file (``cache=True``)
on an earlier run. Nothing else in courtier imports it: the crawl path asks
``simhash.compiled_kernels()``, which falls back to the numpy path when numba is missing or
cannot compile.

The arithmetic is the module contract of ``dedup/simhash.py`` step by step, on
``uint64`` only (numba would turn an ``int64``/``uint64`` mix into floats, so every
constant and shift count is a ``np.uint64``):

* :func:`word_hashes` scans the separated text (every separator byte an ASCII space)
  once and hashes each word of 1–16 bytes with xxh3-64's short-input paths, as
  ``dedup/word_hashes.py`` does with numpy; a longer word is left to the caller (its
  slot holds 0 and its index, start and length are returned).
* :func:`simhash_of_hashes` builds the 3-word shingles and counts each bit's votes
  eight bits at a time in the byte lanes of ``uint64`` sums, flushed every 255 features
  before a lane could carry.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from courtier.dedup.word_hashes import SECRET

_U = np.uint64


def _le32(off: int) -> int:
    return int.from_bytes(SECRET[off:off + 4], "little")


def _le64(off: int) -> int:
    return int.from_bytes(SECRET[off:off + 8], "little")


_FLIP_1TO3 = _U(_le32(0) ^ _le32(4))
_FLIP_4TO8 = _U(_le64(8) ^ _le64(16))
_FLIP_9TO16_LO = _U(_le64(24) ^ _le64(32))
_FLIP_9TO16_HI = _U(_le64(40) ^ _le64(48))
_PRIME64_2 = _U(0xC2B2AE3D27D4EB4F)
_PRIME64_3 = _U(0x165667B19E3779F9)
_PRIME_MX1 = _U(0x165667919E3779F9)
_PRIME_MX2 = _U(0x9FB21C651E98DF25)
_LOW32 = _U(0xFFFFFFFF)
_BYTE = _U(0xFF)
_GOLDEN = _U(0x9E3779B97F4A7C15)
_MIX1 = _U(0xBF58476D1CE4E5B9)
_MIX2 = _U(0x94D049BB133111EB)
_BYTE_ONES = _U(0x0101010101010101)
_SPACE = 0x20
#: the longest word hashed here (xxh3's short-input paths); longer ones go back
SHORT = 16


@njit(cache=True, nogil=True, inline="always")
def _read32(buf, at):  # type: ignore[no-untyped-def]
    return (_U(buf[at]) | (_U(buf[at + 1]) << _U(8)) | (_U(buf[at + 2]) << _U(16))
            | (_U(buf[at + 3]) << _U(24)))


@njit(cache=True, nogil=True, inline="always")
def _read64(buf, at):  # type: ignore[no-untyped-def]
    return _read32(buf, at) | (_read32(buf, at + 4) << _U(32))


@njit(cache=True, nogil=True, inline="always")
def _rotl(x, r):  # type: ignore[no-untyped-def]
    return (x << _U(r)) | (x >> _U(64 - r))


@njit(cache=True, nogil=True)
def _short_hash(buf, start, n):  # type: ignore[no-untyped-def]
    """xxh3_64 (seed 0) of the ``n`` (1–16) bytes of ``buf`` from ``start``."""
    if n <= 3:
        c1 = _U(buf[start])
        c2 = _U(buf[start + (n >> 1)])
        c3 = _U(buf[start + n - 1])
        h = ((c1 << _U(16)) | (c2 << _U(24)) | c3 | (_U(n) << _U(8))) ^ _FLIP_1TO3
        h ^= h >> _U(33)
        h *= _PRIME64_2
        h ^= h >> _U(29)
        h *= _PRIME64_3
        h ^= h >> _U(32)
        return h
    if n <= 8:
        h = ((_read32(buf, start) << _U(32)) + _read32(buf, start + n - 4)) ^ _FLIP_4TO8
        h ^= _rotl(h, 49) ^ _rotl(h, 24)
        h *= _PRIME_MX2
        h ^= (h >> _U(35)) + _U(n)
        h *= _PRIME_MX2
        h ^= h >> _U(28)
        return h
    lo = _read64(buf, start) ^ _FLIP_9TO16_LO
    hi = _read64(buf, start + n - 8) ^ _FLIP_9TO16_HI
    # the 128-bit product lo * hi, folded (low half XOR high half), from 32-bit halves
    a_lo, a_hi, b_lo, b_hi = lo & _LOW32, lo >> _U(32), hi & _LOW32, hi >> _U(32)
    lo_lo, hi_lo, lo_hi = a_lo * b_lo, a_hi * b_lo, a_lo * b_hi
    cross = (lo_lo >> _U(32)) + (hi_lo & _LOW32) + lo_hi
    upper = (hi_lo >> _U(32)) + (cross >> _U(32)) + a_hi * b_hi
    lower = (cross << _U(32)) | (lo_lo & _LOW32)
    swapped = _U(0)
    for k in range(8):
        swapped = (swapped << _U(8)) | ((lo >> _U(8 * k)) & _BYTE)
    acc = _U(n) + swapped + hi + (lower ^ upper)
    acc ^= acc >> _U(37)
    acc *= _PRIME_MX1
    acc ^= acc >> _U(32)
    return acc


@njit(cache=True, nogil=True)
def word_hashes(buf, size, out, long_at):  # type: ignore[no-untyped-def]
    """Hash the words of ``buf[:size]`` into ``out``; return ``(words, long words)``.

    ``buf`` holds at least 8 bytes past ``size`` (the 8-byte reads of a word at the end
    stay inside it) and ``buf[size]`` is a space. Word ``w`` longer than :data:`SHORT`
    gets ``out[w] = 0`` and a row ``(w, start, length)`` in ``long_at``.

    The word edges are collected first without a branch per byte (a word's first byte,
    then just past its last, alternate), then the words are hashed: ~20 % faster than
    one loop that branches at every byte on whether a word starts or ends there.
    """
    edges = np.empty(size + 2, dtype=np.int32)
    found = 0
    before = False
    for i in range(size + 1):
        inside = buf[i] != _SPACE
        edges[found] = i
        found += inside != before
        before = inside
    words = found // 2
    longs = 0
    for w in range(words):
        start = edges[2 * w]
        n = edges[2 * w + 1] - start
        if n <= SHORT:
            out[w] = _short_hash(buf, start, n)
        else:
            out[w] = _U(0)
            long_at[longs, 0] = w
            long_at[longs, 1] = start
            long_at[longs, 2] = n
            longs += 1
    return words, longs


@njit(cache=True, nogil=True)
def simhash_of_hashes(h, words):  # type: ignore[no-untyped-def]
    """Steps 3–5 on the word hashes ``h[:words]``: the fingerprint as a ``uint64``."""
    if words == 0:
        return _U(0)
    features = words if words < 3 else words - 2
    counts = np.zeros(64, dtype=np.int64)  # index 8 i + b: features with that bit set
    lanes = np.zeros(8, dtype=np.uint64)   # [b]: byte i counts bit 8 i + b
    pending = 0
    for f in range(features):
        if words < 3:
            x = h[f]
        else:
            x = h[f] * _GOLDEN
            x ^= _rotl(h[f + 1], 21)
            x ^= _rotl(h[f + 2], 42)
            x ^= x >> _U(30)
            x *= _MIX1
            x ^= x >> _U(27)
            x *= _MIX2
            x ^= x >> _U(31)
        for b in range(8):
            lanes[b] += (x >> _U(b)) & _BYTE_ONES
        pending += 1
        if pending == 255 or f == features - 1:
            for b in range(8):
                lane = lanes[b]
                for i in range(8):
                    counts[8 * i + b] += np.int64((lane >> _U(8 * i)) & _BYTE)
                lanes[b] = _U(0)
            pending = 0
    fp = _U(0)
    for j in range(64):
        if counts[j] * 2 > features:
            fp |= _U(1) << _U(j)
    return fp
