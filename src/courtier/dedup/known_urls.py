"""Owner-local URL state: the exact set of known URL keys of each shard a worker holds.

The store's unique key stays the truth about "seen" (DESIGN.md invariant 3). This set is
an exact *subset* of it: a key is in it only once the store has durably got that key
(read from the store while the shard loaded, or acknowledged by a commit or an intake
that succeeded), and the store never deletes a URL row. So

* a key the set holds is known for certain: a link to it is dropped without a write;
* a key the set lacks is *probably* new: it is written, and the store's unique key
  still decides (another worker may have inserted it into this shard meanwhile: the
  write then inserts nothing, it never inserts twice).

Only *complete* shards answer (:meth:`KnownUrls.knows`): their load has read every key
the store held when the read passed it, and every key committed since is added. A shard
still loading, one not held, or one refused by the cap answers None ("not decided
here"): the intake then uses its Bloom filter and the store, as without this set.

Representation, per shard: a sorted numpy array of 16-byte keys (``S16``: compared over
all 16 bytes) plus a small Python set of keys added since the array was last rebuilt.
The set is merged into the array (sorted insert, ``O(shard)``) once it holds
``max(MERGE_MIN, len(array) // MERGE_SHARE)`` keys, so the set costs at most ~1/32 of the
keys at ~90 bytes each: about **16 + 90/32 ≈ 19 bytes per key** (bench/known_urls_bench.py
measures it). ``cap`` bounds the keys held in all; a shard whose load would pass it is
refused and left to the Bloom filter and the store.

Pure logic, no I/O: :mod:`courtier.crawl.known_loader` streams the keys in.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from courtier.core.urls import SHARD_COUNT, shard_of_key

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Keys = npt.NDArray[np.bytes_]
else:  # numpy is imported on first use (a crawl that keeps no known keys never pays it)
    Keys = Any

__all__ = ["DEFAULT_CAP", "KEY_BYTES", "MERGE_MIN", "MERGE_SHARE", "KnownUrls"]

#: bytes of a url_key
KEY_BYTES = 16
#: keys held in all by default (~19 B each: ~380 MB at the cap)
DEFAULT_CAP = 20_000_000
#: a shard's recent keys are merged into its array once they are 1/MERGE_SHARE of it …
MERGE_SHARE = 32
#: … or this many, whichever is more
MERGE_MIN = 256

#: the numpy dtype of a key (numpy reads the string)
_KEY_DTYPE = f"S{KEY_BYTES}"


def _empty() -> Keys:
    import numpy as np

    return np.empty(0, dtype=_KEY_DTYPE)


def keys_array(blob: bytes) -> Keys:
    """A bytes of concatenated 16-byte keys as an ``S16`` array (a copy, writable)."""
    if len(blob) % KEY_BYTES:
        raise ValueError(f"a key blob of {len(blob)} bytes is not a whole number of keys")
    import numpy as np

    return np.frombuffer(blob, dtype=_KEY_DTYPE).copy()


def _merged(keys: Keys, extra: Collection[bytes]) -> Keys:
    """``keys`` (sorted, unique) with ``extra`` inserted, still sorted and unique."""
    if not extra:
        return keys
    import numpy as np

    new = np.array(sorted(extra), dtype=_KEY_DTYPE)
    if len(keys):
        at = keys.searchsorted(new)
        found = keys[np.minimum(at, len(keys) - 1)] == new
        keep = ~found
        new, at = new[keep], at[keep]
        return np.insert(keys, at, new)
    return new


@dataclass(slots=True)
class _Shard:
    """One held shard: its sorted keys, the keys added since, and whether complete."""

    keys: Keys = field(default_factory=_empty)
    recent: set[bytes] = field(default_factory=set)
    #: parts read so far by a load under way (sorted, in key order), joined when complete
    parts: list[Keys] = field(default_factory=list)
    complete: bool = False

    def size(self) -> int:
        return len(self.keys) + len(self.recent) + sum(len(p) for p in self.parts)

    def contains(self, key: bytes) -> bool:
        if key in self.recent:
            return True
        keys = self.keys
        # numpy hands S16 items back without their trailing NUL bytes: compare stripped
        # to stripped (the order of stripped keys is the order of the padded ones)
        probe = key.rstrip(b"\0")
        at = bisect.bisect_left(keys, probe)
        return at < len(keys) and keys[at] == probe


class KnownUrls:
    """The exact known-key sets of the shards this worker holds (module docstring).

    Not thread-safe; one instance belongs to one worker loop.
    """

    def __init__(self, cap: int = DEFAULT_CAP, shard_count: int = SHARD_COUNT) -> None:
        if cap < 0:
            raise ValueError(f"known URL cap must not be negative, got {cap}")
        self.cap = cap
        self.shard_count = shard_count
        self._shards: dict[int, _Shard] = {}
        self._size = 0
        #: shards refused because the cap was reached (they use the Bloom filter and the store)
        self.refused: set[int] = set()
        #: links decided here: known (dropped) and new (written without a store probe first)
        self.hits = 0
        self.misses = 0
        #: key → the batch generation it was handed in under: written by a batch not yet
        #: acknowledged (never claimed known; see :meth:`offer`)
        self._pending: dict[bytes, int] = {}
        self._generation = 0

    # ---- shards come and go --------------------------------------------------------------

    def start(self, shard: int) -> bool:
        """A gained shard begins to load (its earlier state, if any, is dropped first).
        False when the cap is reached: the shard is refused (never decided here)."""
        self.drop([shard])
        if self._size >= self.cap:
            self.refused.add(shard)
            return False
        self._shards[shard] = _Shard()
        return True

    def loaded_part(self, shard: int, part: Keys) -> bool:
        """Keys of a loading shard read from the store (sorted, above every earlier part).
        False, and the shard refused and dropped, when they pass the cap."""
        state = self._shards.get(shard)
        if state is None or state.complete:
            return True  # dropped meanwhile (or a late part): nothing to keep
        if self._size + len(part) > self.cap:
            self.drop([shard])
            self.refused.add(shard)
            return False
        state.parts.append(part)
        self._size += len(part)
        return True

    def finish(self, shard: int) -> None:
        """Every key of the shard has been read: it answers from now on."""
        state = self._shards.get(shard)
        if state is None or state.complete:
            return
        parts = [p for p in state.parts if len(p)]
        if len(parts) > 1:
            import numpy as np

            joined = np.concatenate(parts)
        else:
            joined = parts[0] if parts else _empty()
        before = state.size()
        state.keys = _merged(joined, state.recent)
        state.recent = set()
        state.parts = []
        state.complete = True
        self._size += len(state.keys) - before

    def drop(self, shards: Iterable[int]) -> None:
        """Lost or handed over: their keys are forgotten."""
        for shard in shards:
            self.refused.discard(shard)
            state = self._shards.pop(shard, None)
            if state is not None:
                self._size -= state.size()

    # ---- the intake's questions ----------------------------------------------------------

    def loading(self) -> list[int]:
        """Held shards whose load has not finished, in shard order."""
        return sorted(s for s, st in self._shards.items() if not st.complete)

    def is_complete(self, shard: int) -> bool:
        state = self._shards.get(shard)
        return state is not None and state.complete

    def knows(self, key: bytes, shard: int) -> bool | None:
        """True: the store holds ``key`` for certain. False: it held no such key when this
        shard loaded and none was added since (write it; the store's key still decides).
        None: the shard is not decided here (not held, loading or refused)."""
        state = self._shards.get(shard)
        if state is None or not state.complete:
            return None
        if state.contains(key):
            self.hits += 1
            return True
        self.misses += 1
        return False

    def add(self, keys: Iterable[bytes]) -> None:
        """Keys the store has durably got (after the commit or intake returned). Keys of
        shards not held are ignored; those of a loading shard are kept for its finish."""
        shards = self._shards
        count = self.shard_count
        pending = self._pending
        for key in keys:
            pending.pop(key, None)
            state = shards.get(shard_of_key(key, count))
            if state is None or key in state.recent:
                continue
            if state.complete and state.contains(key):
                continue
            state.recent.add(key)
            self._size += 1
            if state.complete and len(state.recent) >= max(MERGE_MIN,
                                                           len(state.keys) // MERGE_SHARE):
                before = state.size()
                state.keys = _merged(state.keys, state.recent)
                state.recent = set()
                self._size += state.size() - before

    # ---- keys written by batches not acknowledged yet ----------------------------------------

    def offer(self, keys: Iterable[bytes]) -> None:
        """Keys of results handed to the committer: written by the next batch. A link to
        one of them met before that batch ends need not be written again (it rides the
        earlier batch, committed first). They are not known: :meth:`knows` never says so."""
        generation = self._generation
        pending = self._pending
        for key in keys:
            pending[key] = generation

    def is_pending(self, key: bytes) -> bool:
        return key in self._pending

    def batch_started(self) -> int:
        """A commit batch takes every result handed in so far; returns its generation."""
        self._generation += 1
        return self._generation

    def batch_ended(self, generation: int) -> None:
        """That batch was acknowledged (its keys were added first) or given up: the keys
        handed in before it began are pending no more (a later sighting writes them)."""
        self._pending = {k: g for k, g in self._pending.items() if g >= generation}

    # ---- figures -------------------------------------------------------------------------

    def __len__(self) -> int:
        """Keys held (loaded, loading and recent)."""
        return self._size

    def complete_shards(self) -> list[int]:
        return sorted(s for s, st in self._shards.items() if st.complete)

    def keys_of(self, shard: int) -> list[bytes]:
        """Every key held for ``shard`` (loaded, loading and recent), sorted: what the set
        claims the store holds (the owner-local property test checks it against the
        store)."""
        state = self._shards.get(shard)
        if state is None:
            return []
        held = {bytes(k).ljust(KEY_BYTES, b"\0") for k in state.keys}
        held.update(bytes(k).ljust(KEY_BYTES, b"\0") for p in state.parts for k in p)
        return sorted(held | state.recent)

    def nbytes(self) -> int:
        """Bytes of the key arrays (the recent sets not counted: ~90 B a key)."""
        return sum(st.keys.nbytes + sum(p.nbytes for p in st.parts)
                   for st in self._shards.values())
