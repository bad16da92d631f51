"""Write-ahead counting of daily page fetches, so a restart never spends a budget twice
and N workers sharing one crawl share one budget.

The worker counts a fetch against a budget (the crawl-wide ``--daily-budget`` and each
host with a max-pages-per-day policy) when it issues a page lease, and the fetch waits
in :meth:`DayCountLedger.saved` until a store write including that count has finished:
no request goes out whose count could be lost by a crash. The store adds the counts
(:meth:`~courtier.store.cluster.ClusterStore.reserve_day_counts`, an atomic increment),
so counts from several workers sum instead of overwriting each other. Writes coalesce —
one call covers every count made while the previous one ran — so the cost is one small
write per batch of leases, and nothing at all without a budget.

A write that fails is retried with the next one (the increments stay pending). If the
store applied it but the acknowledgement was lost, the retry counts those fetches
twice: the budget can be under-spent by that much, never over-spent.
"""

from __future__ import annotations

import asyncio
import logging

from courtier.core.errors import StoreError
from courtier.core.logs import log_event
from courtier.store.base import Store
from courtier.store.cluster import DayGrant, DayReservation

log = logging.getLogger("courtier.worker")


class DayCountLedger:
    """Counts made but not yet stored, and the one store write in progress."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._dirty: dict[tuple[str, float], int] = {}
        self._noted = 0          # counts made so far (a sequence number)
        self._saved = 0          # every count up to this number is in the store
        self._writing: asyncio.Future[None] | None = None
        #: the latest stored window and count of each key (from the last write)
        self.grants: dict[str, DayGrant] = {}

    def add(self, key: str, day_start: float, n: int = 1) -> None:
        """Count ``n`` fetches of ``key`` in the window that began at ``day_start``;
        stored by :meth:`saved`."""
        slot = (key, day_start)
        self._dirty[slot] = self._dirty.get(slot, 0) + n
        self._noted += 1

    @property
    def pending(self) -> bool:
        return self._saved < self._noted

    async def saved(self) -> None:
        """Return once every count made before this call is in the store.

        A store failure is logged and the wait ends (the commit of the fetch fails the
        same way and is retried); the counts stay pending and go with the next write.
        """
        target = self._noted
        while self._saved < target:
            if self._writing is None:
                self._writing = asyncio.ensure_future(self._write())
            writing = self._writing
            try:
                await asyncio.shield(writing)
            except StoreError as exc:
                log_event(log, logging.WARNING, "day_counts_save_failed",
                          "could not save the daily page counts: %s", exc, reason=str(exc))
                return

    async def _write(self) -> None:
        batch, upto = self._dirty, self._noted
        self._dirty = {}
        asks = [DayReservation(key, start, n) for (key, start), n in batch.items()]
        try:
            self.grants.update(await self.store.reserve_day_counts(asks))
        except BaseException:
            for slot, n in batch.items():  # counted again with the next write
                self._dirty[slot] = self._dirty.get(slot, 0) + n
            raise
        finally:
            self._writing = None
        self._saved = max(self._saved, upto)
