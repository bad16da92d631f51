"""SimHash through compiled loops when numba is installed, else through numpy.

:func:`simhash_words` returns what ``DuplicateTracker.fingerprint`` needs of a page's
text, the fingerprint and the word count, equal to ``simhash64(text)`` and
``text_features(text)[1]`` of ``dedup/simhash.py`` (the definition; the numpy path). The
numpy path makes ~30 array passes over a page's ~4,000 words, each with its own
temporaries; the kernels of ``dedup/_simhash_kernels.py`` make two loops (words and
their hashes, then shingles and bit votes): about a quarter of the CPU on the
benchmark's pages (``bench/simhash_bench.py``).

numba is optional (the ``jit`` extra; ``pip install 'courtier[jit]'``): it is ~200 MB
installed and takes ~0.4 s to import, so only the crawl path loads it
(:func:`prepare`, at the start of a crawl, off the loop), never the CLI's query
commands. Its first run on a machine compiles the kernels (~3 CPU-s) and caches the
machine code beside the module (or in numba's user-wide cache directory when that is
read-only); later runs load the cache (~0.3 s). When numba is missing, or fails to
import or compile, the numpy path is used and the reason is logged once.

Words longer than 16 bytes (rare in prose) are hashed by the ``xxhash`` package, as in
the numpy path.
"""

from __future__ import annotations

import logging
import threading
import warnings
from types import ModuleType
from typing import Any

import numpy as np
import xxhash

from courtier.dedup.simhash import separated, simhash_from_features, text_features

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


def kernels() -> ModuleType | None:
    """The loaded kernels module, or None when the numpy path is in use."""
    global _kernels
    if _kernels is None:
        with _lock:
            if _kernels is None:
                _kernels = _load()
    return _kernels if isinstance(_kernels, ModuleType) else None


def prepare() -> bool:
    """Load (or compile) the kernels now; whether the compiled path is in use.

    The crawl calls this at start-up in a thread, so the first page does not pay it
    on the event loop."""
    return kernels() is not None


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
    """``(simhash64(text), number of SimHash words of text)``, compiled when possible."""
    k = kernels()
    if k is None:
        features, words = text_features(text)
        return simhash_from_features(features), words
    return _run(k, separated(text))


def simhash_words_numpy(text: str) -> tuple[int, int]:
    """The same pair by the numpy path (the reference the compiled path is tested on)."""
    features, words = text_features(text)
    return simhash_from_features(features), words
