"""Write-ahead saving of daily page counts, so a restart never spends a budget twice.

The worker notes a budget's new count (the crawl-wide ``--daily-budget`` and each
host with a max-pages-per-day policy) when it issues a page lease, and the fetch
waits in :meth:`DayCountLedger.saved` until a store write including that count
has finished: no request goes out whose count could be lost by a crash. Writes
coalesce — one :meth:`~courtier.store.base.Store.save_day_counts` call covers every
count noted while the previous one ran — so the cost is one small write per
batch of leases, and nothing at all without a budget.
"""

from __future__ import annotations

import asyncio
import logging

from courtier.errors import StoreError
from courtier.store.base import DayCount, Store

log = logging.getLogger("courtier.worker")


class DayCountLedger:
    """Counts noted but not yet saved, and the one store write in progress."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._dirty: dict[str, DayCount] = {}
        self._noted = 0          # counts noted so far (a sequence number)
        self._saved = 0          # every count up to this number is in the store
        self._writing: asyncio.Future[None] | None = None

    def note(self, count: DayCount) -> None:
        """Record a budget's count (the latest per key wins); saved by :meth:`saved`."""
        self._dirty[count.key] = count
        self._noted += 1

    @property
    def pending(self) -> bool:
        return self._saved < self._noted

    async def saved(self) -> None:
        """Return once every count noted before this call is in the store.

        A store failure is logged and the wait ends (the commit of the fetch fails the
        same way and is retried); the counts stay dirty and go with the next write.
        """
        target = self._noted
        while self._saved < target:
            if self._writing is None:
                self._writing = asyncio.ensure_future(self._write())
            writing = self._writing
            try:
                await asyncio.shield(writing)
            except StoreError as exc:
                log.warning("could not save the daily page counts: %s", exc)
                return

    async def _write(self) -> None:
        batch, upto = self._dirty, self._noted
        self._dirty = {}
        try:
            await self.store.save_day_counts(list(batch.values()))
        except BaseException:
            for key, count in batch.items():
                self._dirty.setdefault(key, count)  # newer notes win over the failed batch
            raise
        finally:
            self._writing = None
        self._saved = max(self._saved, upto)
