"""The periodic task that bounds the outbox and the audit log (docs/scale-out.md
"Bounded growth").

Every :data:`RUN_EVERY` seconds (the first run :data:`FIRST_RUN_AFTER` seconds after the
start, off the crawl's first busy minute), the worker on duty asks the store to remove
events older than ``--events-retention`` that every registered consumer has passed and
audit rows older than ``--audit-retention``. A run is bounded: at most
:data:`BATCHES_PER_RUN` store calls of :data:`BATCH` rows per table (PostgreSQL drops
whole day partitions in the first call), so a backlog is worked off over several runs
and never holds the store for long. The task runs beside the crawl loop, never in it:
a failing run is logged and tried again at the next period.

On duty: the one process of a single-worker crawl; in a cluster the worker holding
shard 0 (exactly one worker at a time, and another one takes over with the shard when
it dies). A retention of 0 keeps that table for ever.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from courtier.core.clock import Clock
from courtier.core.errors import StoreError
from courtier.core.logs import log_event
from courtier.store.base import Store

__all__ = ["BATCH", "BATCHES_PER_RUN", "RETENTION_SHARD", "OutboxRetention", "RetentionRun"]

log = logging.getLogger("courtier.retention")

#: in a cluster, the holder of this shard's lease runs the retention
RETENTION_SHARD = 0
#: seconds between two runs
RUN_EVERY = 600.0
#: seconds from the start to the first run
FIRST_RUN_AFTER = 60.0
#: rows one store call removes at most (row-by-row removal: SQLite, memory, the
#: PostgreSQL default partition)
BATCH = 10_000
#: store calls per table and run at most
BATCHES_PER_RUN = 20


@dataclass(frozen=True, slots=True)
class RetentionRun:
    """What one run removed, and the outbox position below which nothing is readable."""

    events: int
    audit: int
    pruned_through: int


class OutboxRetention:
    """Runs the store's ``prune_events`` and ``prune_audit`` with the configured
    retentions (seconds; 0 keeps for ever) while ``on_duty()`` says so."""

    def __init__(self, store: Store, clock: Clock, events_retention: float,
                 audit_retention: float, on_duty: Callable[[], bool] = lambda: True) -> None:
        self._store = store
        self._clock = clock
        self._events_retention = events_retention
        self._audit_retention = audit_retention
        self._on_duty = on_duty

    @property
    def enabled(self) -> bool:
        return self._events_retention > 0 or self._audit_retention > 0

    async def run_once(self) -> RetentionRun:
        """One bounded run (both tables); raises StoreError on failure."""
        now = self._clock.now()
        events = audit = 0
        if self._events_retention > 0:
            cut = now - self._events_retention
            events = await _batches(lambda: self._store.prune_events(cut, BATCH))
        if self._audit_retention > 0:
            cut = now - self._audit_retention
            audit = await _batches(lambda: self._store.prune_audit(cut, BATCH))
        return RetentionRun(events, audit, await self._store.events_pruned_through())

    async def run(self) -> None:
        """Run every :data:`RUN_EVERY` seconds until cancelled."""
        await self._clock.sleep(FIRST_RUN_AFTER)
        while True:
            if self._on_duty():
                await self._run_logged()
            await self._clock.sleep(RUN_EVERY)

    async def _run_logged(self) -> None:
        try:
            done = await self.run_once()
        except StoreError as exc:
            log_event(log, logging.WARNING, "retention_failed",
                      "retention: store unavailable, trying again in %.0f s: %s",
                      RUN_EVERY, exc, reason=str(exc))
            return
        if done.events or done.audit:
            log_event(log, logging.INFO, "retention_pruned",
                      "retention: removed %d events (readable from position %d) and %d "
                      "audit rows", done.events, done.pruned_through + 1, done.audit,
                      events=done.events, audit=done.audit,
                      pruned_through=done.pruned_through)


async def _batches(call: Callable[[], Awaitable[int]]) -> int:
    """Call until a call removes nothing, at most :data:`BATCHES_PER_RUN` times."""
    total = 0
    for _ in range(BATCHES_PER_RUN):
        removed = await call()
        total += removed
        if removed < BATCH:
            break
    return total
