"""URLs given back to the store (:class:`Releaser`): queued copies the worker will not
fetch (a shard drained or lost, a stop, a host's long wait, leases returned by the
frontier).

The refill reads rows without marking them (``Store.read_due``), so a row the worker
holds is QUEUED in the store at the version it was read: one given back due when it
already was needs no write at all, and one given back to be due later (a host's
back-off, its daily budget spent, a WARC write failing) is moved there by
``Store.postpone``, at that version — so the crawl's end and the next owner see when it
is due. Rows an older version marked SCHEDULED are never held (the refill does not read
them; ``reset_scheduled`` returns them when their shard is gained).

Owns: the postponements a store error left owed.

Invariants: a postponement names only shards still held with this worker's epoch (the
store checks the epochs) and the row's version as read (a row committed since is left
alone), and one that fails is kept and sent with the next call, before anything newer:
the refill sends what is owed before it reads, so none lands on a row read again.
"""

from __future__ import annotations

from courtier.core.errors import StoreError
from courtier.frontier.scheduler import Frontier
from courtier.store.base import DueUrl, Store


class Releaser:
    """Gives URLs back to the store, keeping what a store error refused."""

    def __init__(self, store: Store, frontier: Frontier) -> None:
        self._store = store
        self._frontier = frontier
        self._owed: list[tuple[DueUrl, float]] = []

    @property
    def owed(self) -> int:
        """Postponements a store error left for the next call."""
        return len(self._owed)

    async def release_returned(self) -> None:
        """What the frontier handed back since the last call."""
        await self.release(self._frontier.take_released())

    async def release(self, items: list[tuple[DueUrl, float]]) -> None:
        """Give ``items`` (row, when it is due) back: those due later than they were are
        postponed in the store; after a store error they are kept and go with the next
        call."""
        later = [(due, at) for due, at in items if at > due.next_fetch_at]
        if self._owed:
            later, self._owed = self._owed + later, []
        if not later:
            return
        try:
            await self._store.postpone([(due.url_key, due.version, at) for due, at in later],
                                       epochs=dict(self._frontier.epochs))
        except StoreError:
            self._owed = later + self._owed  # and what another call kept meanwhile
            raise
