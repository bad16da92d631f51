"""Per-page duplicate decisions of one crawl process: exact copies and near-duplicates.

* Exact: a payload digest already archived under another URL → the new copy
  is written as a WARC ``revisit`` (identical-payload-digest) pointing at the
  first one. The store's ``payloads`` table is the durable index; a bounded
  in-memory map covers copies whose commit is still pending.
* Near: a 64-bit SimHash within Hamming distance 3 of an earlier page (Manku
  et al.) marks the page ``near_dup_of`` that page. It is never dropped and its
  links are still followed; it is only recrawled less often.

Memory stays bounded: the SimHash index is rotated (started afresh) when it
holds ``max_fingerprints``; the pending-digest map keeps the newest entries.

Scope: one process's index, holding every page it fingerprinted, plus, in a
cluster, an index of the stored SimHashes of the shards it gained
(``DuplicateTracker.restored``, at most ``max_fingerprints``, built off the loop by
:func:`with_pages`, driven by ``cluster/shard_state.py``): a page is compared with
the pages of its own shard whoever fetched them, and with whatever else this
process has seen.

Importing this module loads no numpy: the SimHash code and its index (numpy, ~0.1 CPU-s
to import) load with the first fingerprint or index, or ahead of it, off an event loop,
with :func:`load_fingerprinting` (a crawl does it at its first page fetch, after its first
request: bench/README.md, "Start-up").
"""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from courtier.dedup.simhash_index import SimHashIndex
    from courtier.dedup.simhash_switch import CompiledSwitch

MAX_DISTANCE = 3
MIN_WORDS = 20  # fewer SimHash words than this (plus one): never a near-duplicate


@dataclass(frozen=True, slots=True)
class FirstCopy:
    """Where a payload was first archived: the target of identical-digest revisits."""

    url: str
    fetched_at: float
    warc_file: str
    warc_offset: int


def item_id(url_key: bytes) -> int:
    """The index id of a URL: its first 8 key bytes as a signed integer."""
    return int.from_bytes(url_key[:8], "big", signed=True)


def load_fingerprinting() -> None:
    """Import what fingerprints need (numpy, the SimHash code and its index) now; blocks
    for ~0.1 CPU-s the first time, so an event loop calls it in a thread."""
    import courtier.dedup.simhash
    import courtier.dedup.simhash_index  # noqa: F401


def fingerprinting_loaded() -> bool:
    """Whether :func:`load_fingerprinting` has nothing left to do (no thread needed)."""
    return "courtier.dedup.simhash" in sys.modules and \
        "courtier.dedup.simhash_index" in sys.modules


def new_index() -> SimHashIndex:
    """An empty near-duplicate index (distance ``MAX_DISTANCE``)."""
    from courtier.dedup.simhash_index import SimHashIndex

    return SimHashIndex(MAX_DISTANCE)


def with_pages(base: SimHashIndex, pages: list[tuple[bytes, int]],
               limit: int) -> SimHashIndex:
    """A new index of ``base``'s entries and ``pages`` (``(url_key, simhash)``), the newest
    ``limit`` kept. ``base`` is only read, so this may run in a thread while the loop
    queries ``base``; the result's lookup tables are built here too."""
    import numpy as np

    fps, ids = base.arrays()
    new_fps = np.fromiter((fp for _, fp in pages), dtype=np.uint64, count=len(pages))
    new_ids = np.fromiter((item_id(k) for k, _ in pages), dtype=np.int64, count=len(pages))
    fps, ids = np.concatenate((fps, new_fps))[-limit:], np.concatenate((ids, new_ids))[-limit:]
    index = new_index()
    index.add_many(fps, ids)
    index.near(0)  # builds the per-table offsets now, not at the first lookup on the loop
    return index


def id_hex(item: int) -> str:
    """Back from an index id to the 16-hex-digit url_key prefix (``near_dup_of``)."""
    return item.to_bytes(8, "big", signed=True).hex()


class DuplicateTracker:
    """``switch`` (a crawl's): told the CPU time of each fingerprint taken by the numpy
    path, so the compiled path is loaded once it is worth it (``dedup/simhash_switch.py``);
    without one the compiled path is used only if something else loaded it."""

    def __init__(self, max_fingerprints: int = 2_000_000, recent_digests: int = 50_000,
                 switch: CompiledSwitch | None = None) -> None:
        self.switch = switch
        self.max_fingerprints = max_fingerprints
        self._index: SimHashIndex | None = None
        self._restored: SimHashIndex | None = None
        self.recent: OrderedDict[str, FirstCopy] = OrderedDict()
        self.recent_limit = recent_digests
        self.exact = 0
        self.near = 0

    @property
    def index(self) -> SimHashIndex:
        """The fingerprints of the pages this tracker saw (made at first use)."""
        if self._index is None:
            self._index = new_index()
        return self._index

    @index.setter
    def index(self, index: SimHashIndex) -> None:
        self._index = index

    @property
    def restored(self) -> SimHashIndex:
        """Pages read back from the store (gained shards); replaced whole, never added
        to (made at first use)."""
        if self._restored is None:
            self._restored = new_index()
        return self._restored

    @restored.setter
    def restored(self, index: SimHashIndex) -> None:
        self._restored = index

    def pending_copy(self, digest: str) -> FirstCopy | None:
        """A copy archived by this process whose row may not be committed yet."""
        return self.recent.get(digest)

    def archived(self, digest: str, copy: FirstCopy) -> None:
        if digest not in self.recent:
            self.recent[digest] = copy
            if len(self.recent) > self.recent_limit:
                self.recent.popitem(last=False)

    def fingerprint(self, url_key: bytes, text: str) -> tuple[int, str | None]:
        """SimHash of ``text`` and the url_key prefix of an earlier near-duplicate, if any.

        ``text`` need not have its whitespace collapsed (the words are the same).
        """
        from courtier.dedup.simhash import simhash_words

        if self.switch is not None and self.switch.counting:
            started = time.thread_time()
            fp, words = simhash_words(text)  # = simhash64(text), one tokenize
            self.switch.spent(time.thread_time() - started)
        else:
            fp, words = simhash_words(text)
        me = item_id(url_key)
        if words <= MIN_WORDS:  # too little text to compare: never a near-duplicate
            return fp, None
        twin = next((other for other, _ in self.index.near(fp) if other != me), None)
        if twin is None and len(self.restored):
            twin = next((other for other, _ in self.restored.near(fp) if other != me), None)
        if len(self.index) >= self.max_fingerprints:
            self.index = new_index()
        self.index.add(fp, me)
        if twin is None:
            return fp, None
        self.near += 1
        return fp, id_hex(twin)
