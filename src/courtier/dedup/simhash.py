"""64-bit SimHash of a page's visible text (near-duplicate fingerprints).

DESIGN.md invariant 5: pages whose fingerprints differ in at most 3 bits
(:func:`hamming` ≤ 3) are near-duplicates (Manku, Jain, Das Sarma, WWW 2007).
They are grouped and de-prioritised, never dropped.

How a fingerprint is computed (the contract callers and stored values rely
on; changing any step changes every stored fingerprint):

1. **Tokens.** The text is lower-cased (``str.lower``), encoded as UTF-8,
   and split into *words*: maximal runs of ASCII letters, digits and ``_``
   and of non-ASCII bytes. Every other ASCII character (spaces,
   punctuation, symbols) separates words, so ``"Hello, world!"`` gives
   ``hello`` and ``world``. Non-ASCII punctuation (``“``, ``—``) stays part
   of the word it touches; scripts written without spaces (CJK) give one
   word per run, which is coarse but deterministic.
2. **Token hashes.** Each word is hashed with ``xxh3_64`` (seed 0) over its
   UTF-8 bytes.
3. **Shingles of 3 words.** Feature ``i`` combines the hashes of words
   ``i, i+1, i+2`` (order-sensitive: the second and third are rotated left
   by 21 and 42 bits before they are XOR-ed with the first, multiplied by a
   golden-ratio constant, then the result goes through a splitmix64-style
   finaliser). A text of 1 or 2 words has those words' hashes as its
   features; an empty text (no words) has the fingerprint ``0``.
4. **Weights = frequency.** Every shingle *occurrence* votes once, so a
   shingle that occurs ``k`` times has weight ``k``.
5. **Sign.** Bit ``j`` of the fingerprint is 1 when more than half of the
   features have bit ``j`` set (the weighted sum of ±1 votes is positive;
   a tie gives 0).

Steps 3–5 are vectorised with numpy: the votes of bit ``j`` are counted over
all features at once, eight bits at a time in the byte lanes of ``uint64``
sums (:func:`simhash_from_features`), and compared with ``n / 2``.
Steps 1–2 create no object per word either: :func:`text_features` finds the
word boundaries in the separated bytes and computes every word's ``xxh3_64``
with numpy (``dedup/word_hashes.py``, identical to the ``xxhash`` package's);
:func:`tokenize` and :func:`shingle_hashes` are the same steps on a list of
``bytes`` words, kept as the readable definition. A 4,000-word page costs
about 0.3 ms (``bench/simhash_bench.py`` prints the figure).

**The compiled path.** :func:`simhash_words` (what ``DuplicateTracker`` calls: the
fingerprint and the word count) runs steps 1b–5 as two compiled loops with numba (a
dependency since the fifth CPU round; it was the optional ``jit`` extra): the kernels
of ``dedup/_simhash_kernels.py`` (word edges and xxh3's short paths; shingles and lane
votes) cost about a third of the numpy path (``bench/simhash_bench.py``) and give the
same values (tests check them against it). numba is ~200 MB installed and ~0.45 s to
import, so nothing loads it by importing this module: :func:`simhash_words` takes the
compiled path only once :func:`prepare_compiled` has loaded it, and the numpy path
until then. A crawl loads it in a thread once its pages have shown it is worth the
cost (``dedup/simhash_switch.py``), never at start-up; the CLI's query commands never
do. A machine's first load compiles the kernels (~3 CPU-s) and caches the machine code
beside the module (or in numba's user-wide cache directory when that is read-only);
later loads read it (~0.3 s). When numba is missing or fails to import or compile, the
numpy path is used and the reason logged once.

Fingerprints are unsigned 64-bit Python ints. SQLite and PostgreSQL store
signed 64-bit integers: use :func:`to_signed64` before writing and
:func:`from_signed64` after reading.
"""

from __future__ import annotations

import logging
import threading
import warnings
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

# numpy-free helpers live in fingerprint64 so the store and the CLI load without numpy
from courtier.dedup.fingerprint64 import MASK64, from_signed64, hamming, to_signed64
from courtier.dedup.word_hashes import word_hashes

__all__ = [
    "MASK64",
    "compiled_kernels",
    "from_signed64",
    "hamming",
    "prepare_compiled",
    "separated",
    "shingle_hashes",
    "simhash64",
    "simhash_from_features",
    "simhash_words",
    "simhash_words_numpy",
    "text_features",
    "to_signed64",
    "tokenize",
]

#: bytes.translate table: ASCII letters (folded to lower case), digits, "_" and all
#: bytes >= 0x80 are kept, every other byte becomes a space (a separator for split()).
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_")
_SEPARATE = bytes(
    c | 0x20 if 0x41 <= c <= 0x5A else c if (c in _WORD_BYTES or c >= 0x80) else 0x20
    for c in range(256)
)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_R21, _L21 = np.uint64(43), np.uint64(21)
_R42, _L42 = np.uint64(22), np.uint64(42)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
#: planes summed at once: a byte lane holds at most 255
_LANE = 255
_BYTE_ONES = np.uint64(0x0101010101010101)
_SHIFTS = [np.uint64(b) for b in range(8)]

_digest = xxhash.xxh3_64_digest


def separated(text: str) -> bytes:
    """``text`` as UTF-8 with ASCII folded to lower case and every separator a space."""
    if text.isascii():  # the table folds ASCII case; skips the costlier str.lower()
        return text.encode("ascii").translate(_SEPARATE)
    return text.lower().encode("utf-8", "surrogatepass").translate(_SEPARATE)


def tokenize(text: str) -> list[bytes]:
    """The words of ``text`` as UTF-8 bytes (step 1 of the module contract)."""
    return separated(text).split()


def shingle_hashes(words: list[bytes]) -> npt.NDArray[np.uint64]:
    """The feature hashes of a word list: one per 3-word shingle (steps 2–3).

    Returns an empty array for no words and the plain word hashes for 1–2 words.
    """
    n = len(words)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    # one C-level pass: 8 big-endian digest bytes per word, joined, viewed as uint64
    h = np.frombuffer(b"".join(map(_digest, words)), dtype=">u8").astype(np.uint64)
    return _shingles(h)


def _shingles(h: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Step 3 on the word hashes ``h``: one feature per 3-word shingle."""
    if len(h) < 3:
        return h
    a, b, c = h[:-2], h[1:-1], h[2:]
    x = a * _GOLDEN
    x ^= (b << _L21) | (b >> _R21)
    x ^= (c << _L42) | (c >> _R42)
    # splitmix64 finaliser: every input bit affects every output bit
    x ^= x >> _S30
    x *= _MIX1
    x ^= x >> _S27
    x *= _MIX2
    x ^= x >> _S31
    return x


def text_features(text: str) -> tuple[npt.NDArray[np.uint64], int]:
    """The features of ``text`` (steps 1–3, ``shingle_hashes(tokenize(text))``) and its
    word count, without a Python object per word."""
    h = word_hashes(separated(text))
    return _shingles(h), len(h)


def simhash_from_features(features: npt.NDArray[np.uint64]) -> int:
    """SimHash of feature hashes where each array element votes once (steps 4–5).

    The votes are counted eight bits of every feature byte at a time: plane ``b`` is
    ``(features >> b) & 0x0101…01``, whose byte ``i`` is bit ``8 i + b``; summing up to
    255 planes as ``uint64`` adds the eight byte lanes without carries between them.
    """
    n = int(features.shape[0])
    if n == 0:
        return 0
    pad = -n % _LANE
    rows = (np.concatenate((features, np.zeros(pad, dtype=np.uint64))) if pad
            else features).reshape(-1, _LANE)
    counts = np.empty((8, 8), dtype=np.int64)  # [b, i]: how many features have bit 8 i + b
    plane = np.empty_like(rows)
    add = np.add.reduce
    for b in range(8):
        np.right_shift(rows, _SHIFTS[b], out=plane)
        plane &= _BYTE_ONES
        lanes = add(plane, axis=1, dtype=np.uint64).astype("<u8", copy=False)
        counts[b] = add(lanes.view(np.uint8).reshape(-1, 8), axis=0, dtype=np.int64)
    signs = counts.T.reshape(64) * 2 > n  # index 8 i + b = bit 8 i + b
    packed = np.packbits(signs, bitorder="little")
    return int.from_bytes(packed.tobytes(), "little")


def simhash64(text: str) -> int:
    """The 64-bit SimHash of ``text`` (the visible text of a page), unsigned.

    Deterministic across runs, processes and platforms; ``0`` for a text
    without words. See the module docstring for the exact definition.
    """
    return simhash_from_features(text_features(text)[0])


# --- the compiled path (numba) -------------------------------------------------

log = logging.getLogger(__name__)

_PAD = b"\x20" * 9
_lock = threading.Lock()
#: the kernels module once loaded; False when it cannot be (then numpy is used)
_kernels: ModuleType | bool | None = None


def _load() -> ModuleType | bool:
    """Import the kernels and run each once (compiles them, or loads numba's cache)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba's own (deprecations, cache notes)
            from courtier.dedup import _simhash_kernels as kernels

            _run(kernels, b"warm up the compiled simhash path " + b"x" * 20)
    except ImportError as exc:
        log.info("numba is not installed (%s): SimHash takes the numpy path", exc)
        return False
    except Exception as exc:  # numba's errors (no cache locator, LLVM, typing) vary
        log.warning("compiled SimHash unavailable, using the numpy path: %r", exc)
        return False
    return kernels


def compiled_kernels() -> ModuleType | None:
    """The loaded kernels module, or None when the numpy path is in use."""
    global _kernels
    if _kernels is None:
        with _lock:
            if _kernels is None:
                _kernels = _load()
    return _kernels if isinstance(_kernels, ModuleType) else None


def prepare_compiled() -> bool:
    """Load (or compile) the kernels now; whether the compiled path is in use.

    Blocks for the load (~0.45 CPU-s with numba's cache, ~3 s without): the crawl calls
    it in a thread (``dedup/simhash_switch.py``)."""
    return compiled_kernels() is not None


def _run(k: Any, sep: bytes) -> tuple[int, int]:
    size = len(sep)
    buf = np.frombuffer(sep + _PAD, dtype=np.uint8)
    hashes = np.empty(size // 2 + 1, dtype=np.uint64)  # a word is followed by a space
    long_at = np.empty((size // (k.SHORT + 2) + 1, 3), dtype=np.intp)
    words, longs = k.word_hashes(buf, size, hashes, long_at)
    if longs:
        digest = xxhash.xxh3_64_intdigest
        for w, start, n in long_at[:longs].tolist():
            hashes[w] = digest(sep[start:start + n])
    return int(k.simhash_of_hashes(hashes, words)), int(words)


def simhash_words(text: str) -> tuple[int, int]:
    """``(simhash64(text), number of SimHash words of text)``: compiled once
    :func:`prepare_compiled` has loaded the kernels, by numpy until then (this never
    starts a load)."""
    k = _kernels
    if not isinstance(k, ModuleType):
        features, words = text_features(text)
        return simhash_from_features(features), words
    return _run(k, separated(text))


def simhash_words_numpy(text: str) -> tuple[int, int]:
    """The same pair by the numpy path (the reference the compiled path is tested on)."""
    features, words = text_features(text)
    return simhash_from_features(features), words
