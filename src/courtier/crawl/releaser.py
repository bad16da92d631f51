"""URLs given back to the store (:class:`Releaser`): queued copies the worker will not
fetch (a shard drained or lost, a stop, rows of a failed refill for shards no longer
held, leases returned by the frontier).

Owns: the releases a store error left owed.

Invariants: a release names only shards still held with this worker's epoch (the store
checks the epochs), and a release that fails is kept and sent with the next call, before
anything newer: a store error never strands a row SCHEDULED.
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
        """Releases a store error left for the next call."""
        return len(self._owed)

    async def release_returned(self) -> None:
        """What the frontier handed back since the last call."""
        await self.release(self._frontier.take_released())

    async def release(self, items: list[tuple[DueUrl, float]]) -> None:
        """Give ``items`` (row, when it is due) back; after a store error they are kept and
        go with the next call."""
        if self._owed:
            items, self._owed = self._owed + items, []
        if not items:
            return
        try:
            await self._store.release([(due.url_key, at) for due, at in items],
                                      epochs=dict(self._frontier.epochs))
        except StoreError:
            self._owed = items + self._owed  # and what another call kept meanwhile
            raise
