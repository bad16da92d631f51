"""How a worker makes its results durable (:class:`Committer`): one commit of the
pending results at a time, run beside the loop.

Owns: the results waiting for a commit (``pending``), the batch of the commit under way,
the per-host counters not written yet, the commit task, and the give-up rules of a
stopping worker.

A commit is a store round trip of tens to hundreds of milliseconds on PostgreSQL
(the whole batch: row updates, outbox events, new URLs, host queue). Awaited inside
the loop's turn it stopped the dispatch for that long, so the loop starts it as a task
of its own and goes on issuing fetches; the next batch waits for it (batches reach the
store in order, one at a time).

Invariants:

* **Durability.** A result is committed within about ``COMMIT_EVERY`` plus one commit's
  duration of its fetch; :meth:`durability_lag` counts the batch being committed. WARC
  records are flushed (and, for an object-store archive, their segments recorded) before
  the rows that point at them.
* **Store trouble.** A failed commit is retried every ``COMMIT_RETRY`` with the same batch.
  While it fails, while the commit under way has taken longer than :data:`COMMIT_OVERLAP`,
  or while :data:`MAX_PENDING` results wait, :meth:`may_issue` is False: a slow, hung or
  unreachable store holds the crawl instead of letting uncommitted results pile up.
* **Host counters ride along, not with every batch.** The per-host counters (fetched,
  errors, bytes, time to first byte, status classes: the admin API's host figures, read
  by nothing that decides) are added up here and written with the first batch at least
  :data:`HOST_STATS_EVERY` after the last write (by a commit of their own when no result
  waits), and with every :meth:`flush`. A batch spans a few dozen hosts, each with one
  or two results, so writing them with every batch cost a ``hosts`` row update for
  almost every result. A crash loses at most the last ``HOST_STATS_EVERY`` of them (the
  fetch audit log and the events keep every fetch).
* **Points that need everything durable** — a handover drain, the shutdown — call
  :meth:`flush`, which waits for the commit under way and then commits the rest.
* **A stop is bounded.** Once a stop is asked (:meth:`bound_stop`), a commit that keeps
  failing is retried until that time, then given up with an error naming the count: those
  URLs stay QUEUED at their version in the store, and the next owner of their shards (or
  this worker's next start) reads and fetches them again, as after a crash.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from courtier.core.clock import Clock
from courtier.core.errors import StoreError
from courtier.core.logs import log_event
from courtier.crawl.intake import Intake
from courtier.crawl.metrics import CrawlMetrics
from courtier.crawl.status import CrawlStatus
from courtier.store.base import FetchCommit, HostStatsDelta, Store

log = logging.getLogger("courtier.worker")

#: seconds between commits while results arrive: discovered URLs are durable within this
COMMIT_EVERY = 0.5
#: results per commit batch (a full batch is committed at once)
COMMIT_BATCH = 200
#: results waiting for a commit beyond which no new fetch starts (a slow store)
MAX_PENDING = 400
#: seconds a commit may run beside new fetches; a longer one (a slow or hung store)
#: holds the dispatch until it ends
COMMIT_OVERLAP = 1.0
#: seconds between two attempts of a failed commit
COMMIT_RETRY = 1.0
#: seconds a stopping worker retries a failing commit before it gives the batch up
STOP_COMMIT_WAIT = 60.0
#: seconds between two writes of the per-host counters (module docstring)
HOST_STATS_EVERY = 10.0


class Flushable(Protocol):
    """What the committer needs of the archive: its records durable before the rows."""

    async def flush_off_loop(self) -> None: ...


class Committer:
    """Pending results and the one commit under way."""

    def __init__(self, store: Store, archive: Flushable, clock: Clock, intake: Intake,
                 metrics: CrawlMetrics, status: CrawlStatus, wake: Callable[[], None]) -> None:
        self._store = store
        self._archive = archive
        self._clock = clock
        self._intake = intake
        self._metrics = metrics
        self._status = status
        self._wake = wake
        #: results waiting for the next commit
        self.pending: list[FetchCommit] = []
        self._committing: list[FetchCommit] = []   # the batch of the commit under way
        self._host_stats: dict[str, HostStatsDelta] = {}
        self._stats_written_at = clock.now()   # local time the counters last went out
        self._flushing_from: float | None = None   # oldest fetch time of that batch
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self._started = float("-inf")
        #: local time after which a failing commit is given up (set when a stop is asked)
        self._give_up_at = float("inf")
        #: results given up that way (their URLs are fetched again; module docstring)
        self.given_up = 0
        self._last_start = float("-inf")
        #: the intake's known-link skips already counted in courtier_links_known (the
        #: intake is made with its worker, so it starts at 0)
        self._known_skips_counted = 0

    # ---- what the rest of the worker hands in ------------------------------------------

    def add(self, commit: FetchCommit) -> None:
        self.pending.append(commit)
        # links met again before this batch is acknowledged are not written twice
        self._intake.handed_in(u.url_key for u in commit.new_urls)

    def host_stats(self, host_key: str, shard: int) -> HostStatsDelta:
        """The counters of ``host_key`` not written yet (added to by the caller)."""
        stats = self._host_stats.get(host_key)
        if stats is None:
            stats = self._host_stats[host_key] = HostStatsDelta(host_key, shard)
        return stats

    def held_hosts(self) -> set[str]:
        """Hosts of every result not acknowledged yet (pending, or in the commit under
        way until the store answers): the refill reads none of them (refiller.py)."""
        held = {c.host_key for c in self._committing}
        held.update(c.host_key for c in self.pending)
        return held

    # ---- state ---------------------------------------------------------------------------

    @property
    def committing(self) -> bool:
        """A commit task is under way."""
        return self._task is not None

    @property
    def idle(self) -> bool:
        """Nothing waits and no commit runs."""
        return not self.pending and self._task is None

    def durability_lag(self) -> float:
        """Seconds the oldest uncommitted result has waited (0 when all are durable)."""
        oldest = min((c.fetched_at for c in self.pending), default=self._flushing_from)
        if self._flushing_from is not None and oldest is not None:
            oldest = min(oldest, self._flushing_from)
        return 0.0 if oldest is None else max(0.0, self._clock.now() - oldest)

    def may_issue(self, now: float) -> bool:
        """False while the store does not keep up (see the module docstring)."""
        if self._failing or len(self.pending) >= MAX_PENDING:
            return False
        return self._task is None or now - self._started < COMMIT_OVERLAP

    def bound_stop(self, at: float) -> None:
        """A stop was asked: a failing commit is given up at ``at`` (the earliest asked)."""
        self._give_up_at = min(self._give_up_at, at)

    # ---- committing ------------------------------------------------------------------------

    def maybe_start(self, now: float, fetches_running: bool) -> None:
        """Start a commit when a batch is full, ``COMMIT_EVERY`` has passed since the last
        one, or no fetch runs any more; with no result waiting, when host counters are
        due (a quiet worker's counters are not held back until its next result)."""
        if self._task is not None:
            return
        if self.pending and (
                len(self.pending) >= COMMIT_BATCH or now - self._last_start >= COMMIT_EVERY
                or not fetches_running):
            self.start()
            self._last_start = now
        elif self._host_stats and self._counters_are_due(now):
            self.start()

    def start(self) -> None:
        """Commit the pending results in a task of its own (one at a time)."""
        if self._task is not None or not (self.pending or self._host_stats):
            return
        task = asyncio.create_task(self._commit_batch())
        self._task, self._started = task, self._clock.now()
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        if self._task is task:
            self._task = None
        self._wake()
        if not task.cancelled() and task.exception() is not None:
            log.error("commit task failed", exc_info=task.exception())

    async def _settle(self) -> None:
        """Wait for the commit under way, if any (without cancelling it if we are)."""
        task = self._task
        if task is not None:
            await asyncio.wait({task})
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def flush(self) -> None:
        """Everything handed in so far durable: the commit under way, then the rest."""
        await self._settle()
        if self.pending or self._host_stats:
            await self._commit_batch(every_counter=True)

    async def _commit_batch(self, every_counter: bool = False) -> None:
        batch, self.pending = self.pending, []
        self._committing = batch  # held until applied or given up (the refill's skip set)
        generation = self._intake.batch_started()
        try:
            await self._commit_until_done(batch, self._counters_due(every_counter))
        finally:
            self._committing = []
            self._intake.batch_ended(generation)

    def _counters_due(self, every_counter: bool) -> list[HostStatsDelta]:
        """The host counters this batch writes: all of them at a flush or once
        ``HOST_STATS_EVERY`` has passed since the last write, else none."""
        now = self._clock.now()
        if not every_counter and not self._counters_are_due(now):
            return []
        self._stats_written_at = now
        stats, self._host_stats = list(self._host_stats.values()), {}
        return stats

    def _counters_are_due(self, now: float) -> bool:
        """``HOST_STATS_EVERY`` has passed since the counters last went out."""
        return now - self._stats_written_at >= HOST_STATS_EVERY

    async def _commit_until_done(self, batch: list[FetchCommit],
                                 stats: list[HostStatsDelta]) -> None:
        self._flushing_from = min((c.fetched_at for c in batch), default=None)
        # records must be durable before the rows that point at them; the disk's sync
        # runs in a thread, so the fetches and the lease renewals go on meanwhile
        await self._archive.flush_off_loop()
        settle = getattr(self._archive, "settle", None)  # object-store archive: archive/spool.py
        while True:
            began = self._clock.now()
            try:
                if settle is not None:
                    await settle()  # the segments of those records are recorded first
                result = await self._store.commit(batch, stats)
                self._metrics.commit_seconds.observe(max(0.0, self._clock.now() - began))
                self._flushing_from = None
                self._failing = False
                break
            except StoreError as exc:
                self._failing = True
                self._metrics.store_pauses.inc()
                if self._clock.now() >= self._give_up_at:
                    self._give_up(batch, exc)
                    return
                log_event(log, logging.ERROR, "store_pause",
                          "store write failed, retrying in %.0f s: %s", COMMIT_RETRY, exc,
                          reason=str(exc))
                await asyncio.sleep(COMMIT_RETRY)
        self._status.discovered += result.new_urls
        self._count_links(batch, result.new_urls)
        self._status.stale_commits += result.stale
        self._metrics.stale_commits.inc(result.stale)
        self._metrics.events_emitted.inc(result.applied)
        self._intake.remember(u.url_key for c in batch for u in c.new_urls)

    def _count_links(self, batch: list[FetchCommit], new: int) -> None:
        """Links found and already known: the intake's skips of links the store had
        acknowledged since the last commit, and the batch's rows the store did not insert."""
        offered = sum(len(c.new_urls) for c in batch)
        skips = self._intake.known_skips - self._known_skips_counted
        self._known_skips_counted = self._intake.known_skips
        self._metrics.links_found.inc(offered + skips)
        self._metrics.links_known.inc(max(0, offered - new) + skips)

    def _give_up(self, batch: list[FetchCommit], exc: StoreError) -> None:
        """Stopping, and the store still refuses the batch: leave it, and the results
        handed in since (their links may have been left out as written by this batch:
        dedup/known_urls.py), all fetched again (module docstring)."""
        self._flushing_from = None
        batch.extend(self.pending)
        self.pending = []
        self.given_up += len(batch)
        log_event(log, logging.ERROR, "commit_given_up",
                  "stopping: gave up committing %d results (the store still fails: %s);"
                  " their URLs stay queued and are fetched again by the next owner",
                  len(batch), exc, reason=str(exc))
