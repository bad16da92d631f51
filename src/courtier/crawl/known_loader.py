"""Streams the known URL keys of gained shards from the store (:class:`KnownUrlsLoader`).

Owns: the load pass under way (its shards and the last key read). The keys themselves
live in the :class:`~courtier.dedup.known_urls.KnownUrls` it is given.

A pass reads the shards loading when it began, in key order (a key's leading bits are
its shard), :data:`KEYS_PER_READ` keys a round trip (``Store.url_keys``: one ``bytes``,
1 MB, no row object per key), at most :data:`KEYS_PER_TURN` in one turn of the worker
loop (splitting a read by shard is a few numpy calls; the rest goes on at the next
turn). A shard is complete once a key of a later shard comes back, or a read returns
fewer keys than asked: then it answers the intake and may join the refill. A shard
gained during a pass waits for the next one; a shard dropped during a pass is left out
of the next read and its keys are forgotten. A shard refused by the cap is "done" too:
it joins the refill undecided (the Bloom filter and the store decide its links).

A store error ends the step (logged by the caller's turn) and the pass resumes from the
last key read at the next turn: nothing read is lost, nothing is claimed early.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterable

from courtier.core.logs import log_event
from courtier.core.urls import SHARD_COUNT
from courtier.dedup.known_urls import Keys, KnownUrls, keys_array
from courtier.store.base import Store

__all__ = ["KEYS_PER_READ", "KEYS_PER_TURN", "KnownUrlsLoader", "split_by_shard"]

log = logging.getLogger("courtier.worker")

#: keys one Store.url_keys answer holds at most (1 MB)
KEYS_PER_READ = 65_536
#: keys read in one turn of the worker loop at most
KEYS_PER_TURN = 262_144


def split_by_shard(keys: Keys, shard_count: int = SHARD_COUNT) -> dict[int, Keys]:
    """Sorted keys cut into their shards' runs (a key's shard is its leading bits)."""
    if not len(keys):
        return {}
    import numpy as np

    bits = shard_count.bit_length() - 1
    heads = np.frombuffer(keys.tobytes(), dtype=np.dtype([("h", ">u4"), ("t", "V12")]))["h"]
    shards = (heads >> np.uint32(32 - bits)).astype(np.int64) if bits else np.zeros(
        len(keys), dtype=np.int64)
    found, starts = np.unique(shards, return_index=True)
    ends = [*starts[1:].tolist(), len(keys)]
    return {int(s): keys[a:b] for s, a, b in zip(found.tolist(), starts.tolist(), ends,
                                                   strict=True)}


class KnownUrlsLoader:
    """Loads gained shards' keys into ``known`` in bounded steps."""

    def __init__(self, store: Store, known: KnownUrls, keys_per_read: int = KEYS_PER_READ,
                 keys_per_turn: int = KEYS_PER_TURN) -> None:
        self._store = store
        self.known = known
        self.keys_per_read = keys_per_read
        self.keys_per_turn = keys_per_turn
        #: shards of the pass under way, and the last key it read
        self._pass: list[int] = []
        self._after = b""
        #: shards done (complete or refused) not yet handed out by :meth:`step`
        self._done: set[int] = set()
        self.keys_read = 0
        self.reads = 0
        #: when the pass under way began (perf counter), its shards and keys so far
        self._began = 0.0
        self._pass_shards = 0
        self._pass_keys = 0

    @property
    def loading(self) -> bool:
        """Some gained shard's keys are still being read."""
        return bool(self.known.loading())

    def is_loading(self, shard: int) -> bool:
        return shard in self._pass or (
            not self.known.is_complete(shard) and shard in self.known.loading())

    def gained(self, shards: Iterable[int]) -> None:
        """Shards to load (those refused by the cap are done at once)."""
        for shard in shards:
            if not self.known.start(shard):
                self._done.add(shard)

    def dropped(self, shards: Collection[int]) -> None:
        """Lost or handed over: forget their keys, read no more of them."""
        self.known.drop(shards)
        gone = set(shards)
        self._pass = [s for s in self._pass if s not in gone]
        self._done -= gone

    async def step(self) -> set[int]:
        """Read up to ``keys_per_turn`` keys; return the shards done since the last step
        (complete, or refused by the cap). A StoreError propagates; the pass resumes from
        its last key."""
        read = 0
        while read < self.keys_per_turn:
            if not self._pass:
                self._pass = self.known.loading()
                self._after = b""
                if not self._pass:
                    break
                self._began, self._pass_shards, self._pass_keys = (
                    time.perf_counter(), len(self._pass), 0)
            blob = await self._store.url_keys(self._pass, self._after, self.keys_per_read)
            self.reads += 1
            keys = keys_array(blob)
            read += len(keys)
            self.keys_read += len(keys)
            whole = len(keys) < self.keys_per_read
            runs = split_by_shard(keys, self.known.shard_count)
            last = max(runs) if runs else -1
            for shard, run in runs.items():
                if shard in self._pass and not self.known.loaded_part(shard, run):
                    self._done.add(shard)  # refused by the cap
            finished = [s for s in self._pass if whole or s < last]
            for shard in finished:
                if not self.known.is_complete(shard) and shard in self.known.loading():
                    self.known.finish(shard)
                self._done.add(shard)
            kept = set(self.known.loading())
            self._pass = [s for s in self._pass if s not in finished and s in kept]
            if len(keys):
                self._after = bytes(keys[-1:].tobytes())
            self._pass_keys += len(keys)
            if not self._pass:
                log_event(log, logging.INFO, "known_urls_loaded",
                          "read the known URL keys of %d shards: %d keys in %.1f s (%d held)",
                          self._pass_shards, self._pass_keys,
                          time.perf_counter() - self._began, len(self.known),
                          shards=self._pass_shards, keys=self._pass_keys,
                          held=len(self.known), refused=len(self.known.refused))
        done, self._done = self._done, set()
        return done
