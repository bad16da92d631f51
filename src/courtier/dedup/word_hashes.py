"""``xxh3_64`` (seed 0) of every word of a text in a few numpy passes.

SimHash (``dedup/simhash.py``) hashes each word with ``xxh3_64``. Doing that
one word at a time costs two Python objects per word (the ``bytes`` from
``split`` and the digest), about 80 ns each on the crawl's pages: ~0.35 ms
for a 4,000-word page, the largest single cost of a page in the profile.

Here the words are never materialised. The separated text (one byte per
character, every separator a space) is scanned once for word boundaries,
and the hash of every word of 1–16 bytes is computed from its bytes for all
words at once, following xxh3's short-input paths (the 1–3, 4–8 and 9–16
byte cases; each reads a few little-endian words of the input and of xxh3's
default secret, mixes them and applies a final avalanche). Longer words,
rare in prose, are hashed by the ``xxhash`` package one by one. The result
is identical to ``xxhash.xxh3_64_intdigest(word)`` for every word
(``tests/unit/dedup/test_word_hashes.py`` checks every length and random
bytes against the package).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import xxhash

U64 = npt.NDArray[np.uint64]

#: the first 64 bytes of xxh3's default 192-byte secret (all the short paths read)
SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
)


def _le32(off: int) -> int:
    return int.from_bytes(SECRET[off:off + 4], "little")


def _le64(off: int) -> int:
    return int.from_bytes(SECRET[off:off + 8], "little")


_FLIP_1TO3 = np.uint64(_le32(0) ^ _le32(4))
_FLIP_4TO8 = np.uint64(_le64(8) ^ _le64(16))
_FLIP_9TO16_LO = np.uint64(_le64(24) ^ _le64(32))
_FLIP_9TO16_HI = np.uint64(_le64(40) ^ _le64(48))
_PRIME64_2 = np.uint64(0xC2B2AE3D27D4EB4F)
_PRIME64_3 = np.uint64(0x165667B19E3779F9)
_PRIME_MX1 = np.uint64(0x165667919E3779F9)
_PRIME_MX2 = np.uint64(0x9FB21C651E98DF25)
_LOW32 = np.uint64(0xFFFFFFFF)
_SPACE = 0x20
_PAD = b"\x20" * 8
#: at most this many words outside 4–8 bytes are hashed one by one, not vectorised
FEW = 24


#: the shift counts as numpy scalars, made once (a new np.uint64 per use costs as much
#: as a small array operation)
_SHIFT = [np.uint64(n) for n in range(65)]


def _u(n: int) -> np.uint64:
    return _SHIFT[n]


def _read(buf: npt.NDArray[np.uint8], at: npt.NDArray[np.intp], width: int) -> U64:
    """Little-endian unsigned ints of ``width`` (4 or 8) bytes starting at each offset.

    One strided view gives the unaligned ``width``-byte integer at every byte offset of
    ``buf`` (the padding keeps the last reads inside it); indexing it gathers them.
    """
    every = np.ndarray(shape=(len(buf) - width + 1,), dtype="<u8" if width == 8 else "<u4",
                       buffer=buf, strides=(1,))
    return every[at].astype(np.uint64)


def _xxh64_avalanche(h: U64) -> U64:
    h ^= h >> _u(33)
    h *= _PRIME64_2
    h ^= h >> _u(29)
    h *= _PRIME64_3
    h ^= h >> _u(32)
    return h


def _xxh3_avalanche(h: U64) -> U64:
    h ^= h >> _u(37)
    h *= _PRIME_MX1
    h ^= h >> _u(32)
    return h


def _rotl(h: U64, r: int) -> U64:
    return (h << _u(r)) | (h >> _u(64 - r))


def _mul128_fold64(a: U64, b: U64) -> U64:
    """Low 64 bits XOR high 64 bits of the 128-bit products ``a * b``."""
    a_lo, a_hi = a & _LOW32, a >> _u(32)
    b_lo, b_hi = b & _LOW32, b >> _u(32)
    lo_lo = a_lo * b_lo
    hi_lo = a_hi * b_lo
    lo_hi = a_lo * b_hi
    hi_hi = a_hi * b_hi
    cross = (lo_lo >> _u(32)) + (hi_lo & _LOW32) + lo_hi  # cannot overflow 64 bits
    upper = (hi_lo >> _u(32)) + (cross >> _u(32)) + hi_hi
    lower = (cross << _u(32)) | (lo_lo & _LOW32)
    folded: U64 = lower ^ upper
    return folded


def _len_1to3(buf: npt.NDArray[np.uint8], start: npt.NDArray[np.intp],
              length: npt.NDArray[np.intp]) -> U64:
    c1 = buf[start].astype(np.uint64)
    c2 = buf[start + (length >> 1)].astype(np.uint64)
    c3 = buf[start + length - 1].astype(np.uint64)
    combined = (c1 << _u(16)) | (c2 << _u(24)) | c3 | (length.astype(np.uint64) << _u(8))
    return _xxh64_avalanche(combined ^ _FLIP_1TO3)


def _len_4to8(buf: npt.NDArray[np.uint8], start: npt.NDArray[np.intp],
              length: npt.NDArray[np.intp]) -> U64:
    # the most common path (most words of prose): in place, one temporary at a time.
    # The first 4 bytes shifted up are the 8 bytes at ``start`` shifted up (the high
    # half falls off); the last 4 are the low half of the 8 bytes at ``end - 4`` (the
    # padding keeps both 8-byte reads inside ``buf``).
    every = np.ndarray(shape=(len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))
    h = every[start].astype(np.uint64, copy=False)
    h <<= _SHIFT[32]
    last = every[start + length - 4].astype(np.uint64, copy=False)
    last &= _LOW32
    h += last
    h ^= _FLIP_4TO8
    h ^= _rotl(h, 49) ^ _rotl(h, 24)
    h *= _PRIME_MX2
    mixed = h >> _SHIFT[35]
    mixed += length.astype(np.uint64)
    h ^= mixed
    h *= _PRIME_MX2
    h ^= h >> _SHIFT[28]
    return h


def _len_9to16(buf: npt.NDArray[np.uint8], start: npt.NDArray[np.intp],
               length: npt.NDArray[np.intp]) -> U64:
    lo = _read(buf, start, 8) ^ _FLIP_9TO16_LO
    hi = _read(buf, start + length - 8, 8) ^ _FLIP_9TO16_HI
    acc = length.astype(np.uint64) + lo.byteswap() + hi + _mul128_fold64(lo, hi)
    return _xxh3_avalanche(acc)


def word_hashes(separated: bytes) -> U64:
    """``xxh3_64`` of each word of ``separated``, in order.

    ``separated`` is text where every separator byte is an ASCII space (as
    ``bytes.translate`` with SimHash's table leaves it): a word is a maximal
    run of non-space bytes, exactly the items of ``separated.split()``.

    Words of 4–8 bytes (most of prose) take the vectorised path; the other
    lengths take theirs only when there are more than :data:`FEW` of them, else
    each is hashed by the ``xxhash`` package (a numpy pass costs more than a few
    single calls).
    """
    buf = np.frombuffer(separated + _PAD, dtype=np.uint8)
    word = np.empty(len(buf) + 1, dtype=np.bool_)
    word[0] = False
    np.not_equal(buf, _SPACE, out=word[1:])
    # word edges alternate: a word's first byte, then just past its last
    edges = np.flatnonzero(word[1:] != word[:-1])
    start = edges[0::2]
    length = edges[1::2] - start
    out = np.empty(len(start), dtype=np.uint64)
    other = (length < 4) | (length > 8)
    rest = np.flatnonzero(other)
    with np.errstate(over="ignore"):
        if len(rest) == 0:
            out[:] = _len_4to8(buf, start, length)
            return out
        common = np.flatnonzero(~other)
        if len(common):
            out[common] = _len_4to8(buf, start[common], length[common])
        if len(rest) <= FEW:
            _one_by_one(separated, out, rest, start, length)
            return out
        for lo, hi, path in ((1, 3, _len_1to3), (9, 16, _len_9to16)):
            pick = rest[(length[rest] >= lo) & (length[rest] <= hi)]
            if len(pick):
                out[pick] = path(buf, start[pick], length[pick])
    _one_by_one(separated, out, rest[length[rest] > 16], start, length)
    return out


def _one_by_one(separated: bytes, out: U64, which: npt.NDArray[np.intp],
                start: npt.NDArray[np.intp], length: npt.NDArray[np.intp]) -> None:
    """``out[i]`` = the ``xxhash`` package's hash of word ``i``, for each ``i`` in ``which``."""
    digest = xxhash.xxh3_64_intdigest
    for i, s, n in zip(which.tolist(), start[which].tolist(), length[which].tolist(),
                       strict=True):
        out[i] = digest(separated[s:s + n])
