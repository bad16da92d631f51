"""Near-duplicate lookup over 64-bit SimHash fingerprints (Manku et al., WWW 2007).

:class:`SimHashIndex` answers "which stored fingerprints are within Hamming
distance ``d`` of this one?" without comparing against every stored value.

Block-permutation tables
------------------------
The 64 bits are cut into ``k`` contiguous blocks (``k = d + 1`` by default;
block widths differ by at most one bit). Two fingerprints within distance
``d`` differ in at most ``d`` blocks, so at least ``k - d`` blocks are
equal. For every combination of ``k - d`` blocks there is one *table*,
keyed by the bits of those blocks; any fingerprint within distance ``d``
of a query therefore shares the key of at least one table with it. A query
looks its keys up in every table, then checks the real distance of each
candidate.

Default ``k = d + 1`` (4 blocks of 16 bits for ``d = 3``): ``C(4, 1) = 4``
tables keyed by 16 bits. This is the memory-lean choice: with numpy the
candidate check is cheap, so the ≈ ``4 · N / 65,536`` candidates per query
(≈ 60 at a million fingerprints, ≈ 600 at ten million) cost far less than
the ``C(k, k - d)`` tables a larger ``k`` needs (``k = 5``: 10 tables of
≈ 26-bit keys, ``k = 6``: 20 tables). ``blocks`` may be raised when
indexes grow into the hundreds of millions.

Storage (memory-conscious)
--------------------------
A *main* segment holds all fingerprints (``uint64``) and item ids
(``int64``) in insertion order, and per table a sorted array of keys
(``uint16``/``uint32``/``uint64`` by key width) with a parallel ``uint32``
array of row numbers: ``16 + tables · (key bytes + 4)`` bytes per item,
≈ 40 bytes at the default (``bench/simhash_index_bench.py`` prints the
measured figure). Tables with keys of at most 16 bits also keep a list of
the 65,537 bucket offsets (≈ 2.6 MB each, rebuilt lazily after a merge), so a
lookup is two list reads and a slice; wider keys use ``searchsorted``.

:meth:`SimHashIndex.add` appends to a small *pending* numpy buffer that
queries scan linearly (vectorised); when it reaches ``max(4096, min(len/32,
65,536))`` entries it is merged into the main segment (sorted insert,
``O(len)``), so adding ``N`` items one at a time costs ``O(N · 32)``
element moves in total. :meth:`SimHashIndex.add_many` sorts a whole batch
at once. The index only grows: there is no removal; adding the same item
twice stores it twice (a changed page adds its new fingerprint).

Not thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import combinations

import numpy as np
import numpy.typing as npt

from courtier.core.errors import ConfigError

__all__ = ["SimHashIndex"]

_U64 = np.uint64
_PENDING_MIN = 4096
_PENDING_MAX = 65_536
_ROW_DTYPE = np.uint32


def _block_bounds(blocks: int) -> list[tuple[int, int]]:
    """(start bit, width) of each block; widths differ by at most one bit."""
    base, extra = divmod(64, blocks)
    bounds: list[tuple[int, int]] = []
    start = 0
    for i in range(blocks):
        width = base + (1 if i < extra else 0)
        bounds.append((start, width))
        start += width
    return bounds


class _Table:
    """One block combination: key extraction plus the sorted key → row arrays."""

    __slots__ = ("keys", "offsets", "parts", "rows", "stale", "width")

    def __init__(self, parts: list[tuple[int, int]]) -> None:
        self.parts = parts  # (start bit, width) of each block in the key
        self.width = sum(w for _, w in parts)
        dtype = np.uint16 if self.width <= 16 else np.uint32 if self.width <= 32 else np.uint64
        self.keys: npt.NDArray[np.unsignedinteger] = np.zeros(0, dtype=dtype)
        self.rows: npt.NDArray[np.uint32] = np.zeros(0, dtype=_ROW_DTYPE)
        # keys of <= 16 bits: offsets[key] .. offsets[key + 1] is the key's slice of rows
        self.offsets: list[int] | None = None
        self.stale = False  # offsets must be rebuilt before the next lookup

    def key_of(self, fp: int) -> int:
        key = 0
        offset = 0
        for start, width in self.parts:
            key |= ((fp >> start) & ((1 << width) - 1)) << offset
            offset += width
        return key

    def keys_of(self, fps: npt.NDArray[np.uint64]) -> npt.NDArray[np.unsignedinteger]:
        key = np.zeros(fps.shape[0], dtype=_U64)
        offset = 0
        for start, width in self.parts:
            mask = _U64((1 << width) - 1)
            key |= ((fps >> _U64(start)) & mask) << _U64(offset)
            offset += width
        return key.astype(self.keys.dtype)

    def insert(self, fps: npt.NDArray[np.uint64], first_row: int) -> None:
        """Add rows ``first_row …`` holding ``fps`` to the sorted arrays."""
        new_keys = self.keys_of(fps)
        order = np.argsort(new_keys, kind="stable")
        new_keys = new_keys[order]
        new_rows = (order + first_row).astype(_ROW_DTYPE)
        if self.keys.shape[0] == 0:
            self.keys, self.rows = new_keys, new_rows
        else:
            at = np.searchsorted(self.keys, new_keys, side="right")
            self.keys = np.insert(self.keys, at, new_keys)
            self.rows = np.insert(self.rows, at, new_rows)
        self.stale = self.width <= 16

    def lookup(self, key: int) -> npt.NDArray[np.uint32]:
        if self.stale:  # rebuilt lazily: bulk adds without queries skip it
            bounds = np.arange((1 << self.width) + 1, dtype=np.int64)
            self.offsets = np.searchsorted(self.keys, bounds, side="left").tolist()
            self.stale = False
        offsets = self.offsets
        if offsets is not None:
            return self.rows[offsets[key] : offsets[key + 1]]
        probe = self.keys.dtype.type(key)
        lo = int(np.searchsorted(self.keys, probe, side="left"))
        hi = int(np.searchsorted(self.keys, probe, side="right"))
        return self.rows[lo:hi]


class SimHashIndex:
    """Fingerprints with item ids; finds those within ``max_distance`` bits.

    ``max_distance`` (default 3, DESIGN.md invariant 5) must be in
    ``0 … 31``; ``blocks`` defaults to ``max_distance + 1`` and must be in
    ``max_distance + 1 … 64``. Raises :class:`~courtier.core.errors.ConfigError`
    otherwise. Holds at most ``2**32 - 1`` items.
    """

    def __init__(self, max_distance: int = 3, blocks: int | None = None) -> None:
        if not 0 <= max_distance < 32:
            raise ConfigError(f"simhash max_distance must be in 0..31, got {max_distance}")
        k = max_distance + 1 if blocks is None else blocks
        if not max_distance < k <= 64:
            raise ConfigError(
                f"simhash blocks must be in {max_distance + 1}..64 for max_distance "
                f"{max_distance}, got {k}"
            )
        self.max_distance = max_distance
        self.blocks = k
        bounds = _block_bounds(k)
        self._tables = [
            _Table([bounds[i] for i in combo]) for combo in combinations(range(k), k - max_distance)
        ]
        self._fps: npt.NDArray[np.uint64] = np.zeros(0, dtype=_U64)
        self._ids: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._main = 0  # rows of _fps/_ids that are in the tables
        self._pend_fps: npt.NDArray[np.uint64] = np.zeros(64, dtype=_U64)
        self._pend_ids: npt.NDArray[np.int64] = np.zeros(64, dtype=np.int64)
        self._pending = 0  # used rows of the pending buffers

    @property
    def tables(self) -> int:
        """Number of block-permutation tables (``C(blocks, blocks - max_distance)``)."""
        return len(self._tables)

    def __len__(self) -> int:
        return self._main + self._pending

    def add(self, fp: int, item_id: int) -> None:
        """Store fingerprint ``fp`` (unsigned 64-bit) for ``item_id`` (signed 64-bit).

        Raises :class:`ValueError` when either is out of range.
        """
        if not 0 <= fp < 1 << 64:
            raise ValueError(f"fingerprint is not an unsigned 64-bit value: {fp}")
        if not -(1 << 63) <= item_id < 1 << 63:
            raise ValueError(f"item id is not a signed 64-bit value: {item_id}")
        n = self._pending
        if n == self._pend_fps.shape[0]:
            self._pend_fps = np.concatenate((self._pend_fps, np.zeros(n, dtype=_U64)))
            self._pend_ids = np.concatenate((self._pend_ids, np.zeros(n, dtype=np.int64)))
        self._pend_fps[n] = fp
        self._pend_ids[n] = item_id
        self._pending = n + 1
        if self._pending >= max(_PENDING_MIN, min(self._main // 32, _PENDING_MAX)):
            self.flush()

    def add_many(self, fps: Iterable[int], item_ids: Iterable[int]) -> None:
        """Store many fingerprints at once (one sort per table); same rules as :meth:`add`.

        Raises :class:`ValueError` when the two sequences differ in length.
        """
        fp_arr = np.asarray(fps if isinstance(fps, np.ndarray) else list(fps), dtype=_U64)
        id_arr = np.asarray(item_ids if isinstance(item_ids, np.ndarray) else list(item_ids),
                            dtype=np.int64)
        if fp_arr.shape != id_arr.shape:
            raise ValueError(f"{fp_arr.shape[0]} fingerprints but {id_arr.shape[0]} item ids")
        self.flush()
        self._append_main(fp_arr, id_arr)

    def flush(self) -> None:
        """Merge the pending buffer into the sorted tables (queries work either way)."""
        n = self._pending
        if n == 0:
            return
        self._pending = 0
        self._append_main(self._pend_fps[:n].copy(), self._pend_ids[:n].copy())

    def _append_main(self, fp_arr: npt.NDArray[np.uint64], id_arr: npt.NDArray[np.int64]) -> None:
        if fp_arr.shape[0] == 0:
            return
        first = self._main
        if first + fp_arr.shape[0] > np.iinfo(_ROW_DTYPE).max:
            raise ValueError("SimHashIndex holds at most 2**32 - 1 items")
        self._fps = np.concatenate((self._fps[:first], fp_arr))
        self._ids = np.concatenate((self._ids[:first], id_arr))
        self._main = first + fp_arr.shape[0]
        for table in self._tables:
            table.insert(fp_arr, first)

    def arrays(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
        """Copies of every stored fingerprint and item id (main segment, then pending)."""
        n = self._pending
        return (np.concatenate((self._fps[: self._main], self._pend_fps[:n])),
                np.concatenate((self._ids[: self._main], self._pend_ids[:n])))

    def near(self, fp: int) -> list[tuple[int, int]]:
        """``(item_id, distance)`` of every stored fingerprint within ``max_distance`` of ``fp``.

        Sorted by distance, then item id; each stored entry appears once.
        Raises :class:`ValueError` when ``fp`` is not an unsigned 64-bit value.
        """
        if not 0 <= fp < 1 << 64:
            raise ValueError(f"fingerprint is not an unsigned 64-bit value: {fp}")
        found: list[tuple[int, int]] = []
        probe = _U64(fp)
        if self._main:
            parts = [table.lookup(table.key_of(fp)) for table in self._tables]
            rows = np.concatenate(parts) if len(parts) > 1 else parts[0]
            if rows.shape[0]:
                dist = np.bitwise_count(self._fps[rows] ^ probe)
                hit = np.flatnonzero(dist <= self.max_distance)
                if hit.shape[0]:
                    # a row matching in several tables is reported once
                    uniq = sorted(set(rows[hit].tolist()))
                    near_rows = np.asarray(uniq, dtype=np.int64)
                    dists = np.bitwise_count(self._fps[near_rows] ^ probe)
                    found.extend(zip(self._ids[near_rows].tolist(), dists.tolist(), strict=True))
        if self._pending:
            dist = np.bitwise_count(self._pend_fps[: self._pending] ^ probe)
            hit = dist <= self.max_distance
            ids = self._pend_ids[: self._pending][hit]
            found.extend(zip(ids.tolist(), dist[hit].tolist(), strict=True))
        found.sort(key=lambda pair: (pair[1], pair[0]))
        return found

    def memory_bytes(self) -> int:
        """Bytes of the index's numpy arrays (main segment, tables, pending buffer).

        Excludes the per-table offset lists of 16-bit keys (65,537 Python ints,
        ≈ 2.6 MB per table whatever the size of the index).
        """
        total = self._fps.nbytes + self._ids.nbytes + self._pend_fps.nbytes + self._pend_ids.nbytes
        for table in self._tables:
            total += table.keys.nbytes + table.rows.nbytes
        return total
