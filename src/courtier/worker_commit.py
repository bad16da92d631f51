"""How a worker makes its results durable, as a mixin of :class:`~courtier.worker.Worker`:
one commit of the pending results at a time, run beside the loop.

A commit is a store round trip of tens to hundreds of milliseconds on PostgreSQL
(the whole batch: row updates, outbox events, new URLs, host queue). Awaited inside
the loop's turn it stopped the dispatch for that long: no fetch started while the
batch was written, and a worker on PostgreSQL spent about a third of a CPU-bound crawl
waiting there. Now the turn starts the commit as a task of its own and goes on
issuing fetches; the next batch waits for it (batches reach the store in order, one
at a time).

What stays as it was:

* **Durability.** A result is committed within about ``COMMIT_EVERY`` plus one commit's
  duration of its fetch; :meth:`_durability_lag` counts the batch being committed.
* **Store trouble.** A failed commit is retried every second with the same batch.
  While it fails, while the commit under way has taken longer than
  :data:`COMMIT_OVERLAP`, or while :data:`MAX_PENDING` results wait, the loop starts no
  fetch (``may_issue``): a slow, hung or unreachable store holds the crawl, as it did
  when the loop waited for every commit, instead of letting uncommitted results pile
  up in memory.
* **Points that need everything durable** — a handover drain, the shutdown — call
  :meth:`_flush`, which waits for the commit under way and then commits the rest.
* **A stop is bounded.** Once a stop is asked, a commit that keeps failing is retried
  for :data:`STOP_COMMIT_WAIT` seconds (after a second Ctrl-C: tried once), then given
  up with an error naming the count: those URLs stay SCHEDULED in the store, and the
  next owner of their shards (or this worker's next start) resets and fetches them
  again, as after a crash. A store that never answers no longer keeps a stopping worker
  alive forever.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from courtier.clock import Clock
from courtier.errors import StoreError
from courtier.intake import Intake
from courtier.metrics import CrawlMetrics
from courtier.store.base import FetchCommit, HostStatsDelta, Store

if TYPE_CHECKING:
    from courtier.archive.base import ArchiveWriter
    from courtier.worker import CrawlStatus

log = logging.getLogger("courtier.worker")

#: results waiting for a commit beyond which no new fetch starts (a slow store)
MAX_PENDING = 400
#: seconds a commit may run beside new fetches; a longer one (a slow or hung store)
#: holds the dispatch until it ends
COMMIT_OVERLAP = 1.0
#: seconds between two attempts of a failed commit
COMMIT_RETRY = 1.0
#: seconds a stopping worker retries a failing commit before it gives the batch up
STOP_COMMIT_WAIT = 60.0


class CommitSteps:
    """The commit side of the loop; the attributes are the worker's."""

    store: Store
    clock: Clock
    intake: Intake
    archive: ArchiveWriter
    metrics: CrawlMetrics
    status: CrawlStatus
    _pending: list[FetchCommit]
    _committing: list[FetchCommit]
    _host_stats: dict[str, HostStatsDelta]
    _wakeup: asyncio.Event
    _flushing_from: float | None
    _commit_task: asyncio.Task[None] | None
    _commit_failing: bool
    _commit_started: float
    #: local time after which a failing commit is given up (set when a stop is asked)
    _commit_give_up_at: float
    #: results given up that way (their URLs are fetched again; see the docstring)
    _given_up: int

    def _durability_lag(self) -> float:
        """Seconds the oldest uncommitted result has waited (0 when all are durable)."""
        oldest = min((c.fetched_at for c in self._pending), default=self._flushing_from)
        if self._flushing_from is not None and oldest is not None:
            oldest = min(oldest, self._flushing_from)
        return 0.0 if oldest is None else max(0.0, self.clock.now() - oldest)

    @property
    def committing(self) -> bool:
        """A commit task is under way."""
        return self._commit_task is not None

    def may_issue(self, now: float) -> bool:
        """False while the store does not keep up (see the module docstring)."""
        if self._commit_failing or len(self._pending) >= MAX_PENDING:
            return False
        return self._commit_task is None or now - self._commit_started < COMMIT_OVERLAP

    def _start_commit(self) -> None:
        """Commit the pending results in a task of its own (one at a time)."""
        if self._commit_task is not None or not (self._pending or self._host_stats):
            return
        task = asyncio.create_task(self._commit_batch())
        self._commit_task, self._commit_started = task, self.clock.now()
        task.add_done_callback(self._commit_done)

    def _commit_done(self, task: asyncio.Task[None]) -> None:
        if self._commit_task is task:
            self._commit_task = None
        self._wakeup.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("commit task failed", exc_info=task.exception())

    async def _settle_commit(self) -> None:
        """Wait for the commit under way, if any (without cancelling it if we are)."""
        task = self._commit_task
        if task is not None:
            await asyncio.wait({task})
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def _flush(self) -> None:
        """Everything fetched so far durable: the commit under way, then the rest."""
        await self._settle_commit()
        if self._pending or self._host_stats:
            await self._commit_batch()

    async def _commit_batch(self) -> None:
        batch, self._pending = self._pending, []
        self._committing = batch  # held until applied or given up (worker_refill._not_held)
        try:
            await self._commit_until_done(batch)
        finally:
            self._committing = []

    async def _commit_until_done(self, batch: list[FetchCommit]) -> None:
        self._flushing_from = min((c.fetched_at for c in batch), default=None)
        stats, self._host_stats = list(self._host_stats.values()), {}
        self.archive.flush()  # records must be durable before the rows that point at them
        settle = getattr(self.archive, "settle", None)  # object-store archive: archive/spool.py
        while True:
            began = self.clock.now()
            try:
                if settle is not None:
                    await settle()  # the segments of those records are recorded first
                result = await self.store.commit(batch, stats)
                self.metrics.commit_seconds.observe(max(0.0, self.clock.now() - began))
                self._flushing_from = None
                self._commit_failing = False
                break
            except StoreError as exc:
                self._commit_failing = True
                self.metrics.store_pauses.inc()
                if self.clock.now() >= self._commit_give_up_at:
                    self._give_up(batch, exc)
                    return
                log.error("store write failed, retrying in %.0f s: %s", COMMIT_RETRY, exc)
                await asyncio.sleep(COMMIT_RETRY)
        self.status.discovered += result.new_urls
        self.status.stale_commits += result.stale
        self.metrics.stale_commits.inc(result.stale)
        self.metrics.events_emitted.inc(result.applied)
        self.intake.remember(u.url_key for c in batch for u in c.new_urls)

    def _give_up(self, batch: list[FetchCommit], exc: StoreError) -> None:
        """Stopping, and the store still refuses the batch: leave it (module docstring)."""
        self._flushing_from = None
        self._given_up += len(batch)
        log.error("stopping: gave up committing %d results (the store still fails: %s);"
                  " their URLs stay scheduled and are fetched again by the next owner",
                  len(batch), exc)
