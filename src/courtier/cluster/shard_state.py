"""Trap statistics and the near-duplicate index follow the shard (DESIGN §5).

A worker's :class:`~courtier.frontier.trap_state.ShardedTemplateTracker` and its
:class:`~courtier.dedup.pages.DuplicateTracker` live in its memory; this keeper moves
the part of them that belongs to a shard through the store, so that a shard's next
owner — after a handover *or* a crash — continues where the last one stopped. A process
alone (the embedded mode) keeps one too, for the next run on the same store: it holds
every shard, saves on leaving instead of on a handover, and rebuilds the index of every
shard as it starts.

* **Trap statistics** are per host (the shard is the host key's), saved with
  ``Store.save_trap_stats``: the hosts changed since their last save, every
  :data:`SAVE_EVERY` seconds (a crash loses at most that much) and, for the shards
  handed over, during the drain before the lease is released. The next owner merges
  the stored blob in when it registers the host, before any request to it.
* **Near-duplicate index**: the store's ``urls.simhash`` column already holds the
  SimHash of every fetched HTML page, so nothing more is saved. A gained shard joins
  the refill only once the SimHashes of its most recently fetched pages (at most
  :data:`SIMHASHES_PER_SHARD`) have been added to the index: from the store, never from
  the old owner's memory. The rebuild reads as many shards per round trip as should
  hold :data:`ROWS_PER_QUERY` rows (the first round trip assumes each shard full; the
  next ones go by the rows per shard seen so far, at least :data:`ROWS_ASSUMED`: URL
  keys are hashed, so shards fill alike, and a new crawl's 1,024 empty shards take two
  round trips instead of 256, ~20 ms of its start-up), stops after :data:`ROWS_PER_TURN`
  rows in one turn of
  the worker loop (the rest goes on at the next turn) and merges them into a new copy of
  the index of restored pages in a thread (:func:`~courtier.dedup.pages.with_pages`:
  sorting millions of fingerprints is O(index) numpy work), which then replaces the
  old one: no step keeps the loop busy for long.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection

from courtier.core.clock import Clock
from courtier.core.errors import StoreError
from courtier.core.logs import log_event
from courtier.core.urls import shard_of
from courtier.dedup.pages import DuplicateTracker, with_pages
from courtier.frontier.trap_state import ShardedTemplateTracker, export
from courtier.frontier.traps import TemplateTracker
from courtier.store.base import Store
from courtier.store.cluster import TrapStats

__all__ = [
    "ROWS_ASSUMED", "ROWS_PER_QUERY", "ROWS_PER_TURN", "SAVE_EVERY", "SIMHASHES_PER_SHARD",
    "ShardStateKeeper",
]

log = logging.getLogger("courtier.worker")

#: seconds between saves of the trap statistics that changed (the loss bound of a crash)
SAVE_EVERY = 5.0
#: SimHashes of one gained shard added to the index (the most recently fetched pages);
#: 2,048 × 1,024 shards ≈ the index's own capacity (DuplicateTracker.max_fingerprints)
SIMHASHES_PER_SHARD = 2048
#: rows one load_simhashes answer should hold at most (decoding it stays a few ms of loop)
ROWS_PER_QUERY = 8192
#: stored SimHashes per shard assumed at least when sizing a round trip of the rebuild
ROWS_ASSUMED = 8
#: rows read in one turn of the worker loop at most, merged into the index in one thread
#: job (then the turn ends; the rest is read at the next turn)
ROWS_PER_TURN = 65_536


class ShardStateKeeper:
    """Saves and restores the shard-bound part of a worker's trap and near-dup state."""

    def __init__(self, store: Store, tracker: TemplateTracker | None,
                 duplicates: DuplicateTracker, clock: Clock,
                 save_every: float = SAVE_EVERY,
                 simhashes_per_shard: int = SIMHASHES_PER_SHARD) -> None:
        self.store = store
        #: None when the crawl has no template tracker (or a plain one that cannot export)
        self.tracker = tracker if isinstance(tracker, ShardedTemplateTracker) else None
        self.duplicates = duplicates
        self.clock = clock
        self.save_every = save_every
        self.simhashes_per_shard = simhashes_per_shard
        #: gained shards whose near-duplicate pages are not in the index yet
        self.rebuilding: set[int] = set()
        self._last_save = clock.now()
        self.hosts_saved = 0
        self.hosts_restored = 0
        #: hosts read back from the store before a page of them was processed
        self.hosts_recalled = 0
        self.pages_restored = 0
        #: shards and SimHash rows the rebuild has read so far (they size its round trips)
        self.shards_read = 0
        self.rows_read = 0

    # ---- trap statistics ----------------------------------------------------------------------

    async def restore_hosts(self, host_keys: Collection[str]) -> None:
        """Merge the stored statistics of newly registered hosts (a StoreError propagates:
        the caller registers nothing and retries)."""
        tracker = self.tracker
        if tracker is None or not host_keys:
            return
        stored = await self.store.load_trap_stats(host_keys)
        for key in host_keys:
            item = stored.get(key)
            if item is None:  # not brought into the working set: a refill may register
                tracker.nothing_stored(key)  # more hosts than it holds
            elif self._adopt(tracker, key, item):
                self.hosts_restored += 1

    async def recall(self, host_key: str) -> None:
        """Before a page of the host is processed: its statistics back from the store when
        they left the working set (or were never merged with the store's copy). A store
        error is logged and the page goes on with what memory holds (the store's copy is
        merged in before the host is saved)."""
        tracker = self.tracker
        if tracker is None or tracker.is_ready(host_key):
            return
        try:
            stored = await self.store.load_trap_stats([host_key])
        except StoreError as exc:
            log_event(log, logging.WARNING, "trap_state_not_recalled",
                      "trap statistics of %s not read back: %s", host_key, exc,
                      host=host_key, reason=str(exc))
            return
        item = stored.get(host_key)
        if self._adopt(tracker, host_key, item) and item is not None:
            self.hosts_recalled += 1

    @staticmethod
    def _adopt(tracker: ShardedTemplateTracker, key: str, item: TrapStats | None) -> bool:
        """The host into the working set, merged with ``item``; False (and the host taken
        as if nothing were stored: the row is replaced at its next save) for a row this
        version cannot read."""
        try:
            tracker.adopt(key, None if item is None else item.data)
        except ValueError as exc:
            log_event(log, logging.WARNING, "trap_state_not_restored",
                      "trap statistics of %s not restored: %s", key, exc, host=key,
                      reason=str(exc))
            tracker.adopt(key, None)
            return False
        return True

    async def save_hosts(self, wanted: Callable[[str], bool], resident: bool = True) -> int:
        """Save the changed hosts ``wanted`` selects (``resident=False``: only those that
        left the working set), each merged first with the store's copy if it never was; on
        a store error they stay changed (saved by a later call) and the error propagates.
        Returns how many were saved."""
        tracker = self.tracker
        if tracker is None:
            return 0
        taken = tracker.take_changed(wanted, resident)
        try:
            unmerged = set(tracker.unmerged(k for k, _ in taken))
            stored = await self.store.load_trap_stats(unmerged) if unmerged else {}
            rows = []
            for key, host in taken:
                if key in unmerged:
                    item = stored.get(key)
                    try:
                        tracker.merge_into(key, host, None if item is None else item.data)
                    except ValueError:  # a row this version cannot read: replaced
                        tracker.merge_into(key, host, None)
                rows.append(TrapStats(key, shard_of(key), export(host)))
            await self.store.save_trap_stats(rows)
        except StoreError:
            tracker.give_back(taken)
            raise
        self.hosts_saved += len(rows)
        return len(rows)

    async def tick(self, held: Collection[int]) -> None:
        """Every ``save_every`` seconds: save the changed hosts of the shards held; at once,
        the hosts that left the working set once half of ``leaving_limit`` wait (those of
        shards not held are forgotten: their owner saves them)."""
        tracker = self.tracker
        if tracker is None:
            return
        now = self.clock.now()
        periodic = now - self._last_save >= self.save_every
        if not periodic and tracker.leaving < max(1, tracker.leaving_limit // 2):
            return
        shards = set(held)
        tracker.drop_leaving(lambda key: shard_of(key) not in shards)
        if periodic:
            self._last_save = now
        await self.save_hosts(lambda key: shard_of(key) in shards, resident=periodic)

    async def hand_over(self, shards: Collection[int]) -> int:
        """Before releasing ``shards``: save their hosts' changed statistics, then forget
        those hosts. A store error is logged (the next owner then continues from the last
        periodic save, as after a crash). Returns how many hosts were saved."""
        tracker = self.tracker
        self.rebuilding.difference_update(shards)
        if tracker is None or not shards:
            return 0
        moving = set(shards)
        saved = 0
        try:
            saved = await self.save_hosts(lambda key: shard_of(key) in moving)
        except StoreError as exc:
            log_event(log, logging.WARNING, "handover_save_failed",
                      "could not save the trap statistics of a handover: %s", exc,
                      reason=str(exc), shards=sorted(moving))
        tracker.forget_hosts([k for k in tracker.hosts() if shard_of(k) in moving])
        return saved

    # ---- near-duplicate index -----------------------------------------------------------------

    def gained(self, shards: Collection[int]) -> None:
        """Shards to rebuild the index for before they join the refill."""
        self.rebuilding.update(shards)

    def dropped(self, shards: Collection[int]) -> None:
        """Shards lost or handed over before their rebuild finished."""
        self.rebuilding.difference_update(shards)

    def _shards_per_query(self) -> int:
        """Shards whose stored SimHashes should make about ``ROWS_PER_QUERY`` rows: each
        one full before any was read, then the rows per shard read so far (at least
        ``ROWS_ASSUMED``)."""
        full = max(1, self.simhashes_per_shard)
        per_shard = full if not self.shards_read else min(full, max(
            ROWS_ASSUMED, -(-self.rows_read // self.shards_read)))
        return max(1, ROWS_PER_QUERY // per_shard)

    async def rebuild(self) -> set[int]:
        """Add the stored SimHashes of shards being rebuilt, up to ``ROWS_PER_TURN`` rows;
        returns the shards now complete (they may join the refill)."""
        ready: set[int] = set()
        pages: list[tuple[bytes, int]] = []
        while self.rebuilding and len(pages) < ROWS_PER_TURN:
            batch = sorted(self.rebuilding)[:self._shards_per_query()]
            found = await self.store.load_simhashes(batch, self.simhashes_per_shard)
            for shard in batch:
                pages += found.get(shard, [])
            self.shards_read += len(batch)
            self.rows_read += sum(len(rows) for rows in found.values())
            # a shard dropped while its pages were read is not ready (nor rebuilding)
            ready |= self.rebuilding.intersection(batch)
            self.rebuilding.difference_update(batch)
        if pages:
            dups = self.duplicates
            # the merge is O(index) numpy work: in a thread; the loop goes on querying the
            # old index (only read by the thread) until the new one replaces it
            dups.restored = await asyncio.to_thread(
                with_pages, dups.restored, pages, dups.max_fingerprints)
        self.pages_restored += len(pages)
        return ready
