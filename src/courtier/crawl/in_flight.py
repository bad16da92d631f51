"""The fetches under way (:class:`InFlight`).

Owns: each running fetch task and the lease it serves. Nothing else starts, cancels or
counts fetches.

Invariants:

* a task is listed from its start until it is done (its done-callback removes it and
  wakes the loop), so ``len(in_flight)`` is what counts against ``--concurrency``;
* a cancelled task gives its lease back itself (the fetch pipeline's ``finally``
  paths), and one cancelled before its first step, whose fetch never ran, gives it back
  through ``unstarted``: cancelling here never loses a URL nor holds a host. (uvloop
  runs the timers that fell due before the first step of the tasks queued meanwhile, so
  the fence, cutting every fetch without its answer, met tasks the turn that held the
  loop past it had just started; their hosts stayed in flight for ever);
* a task is *answered* from the moment its fetch has the whole answer (the fetch says
  so: :meth:`answered`) until it is done: nothing of it is open at a server any more,
  only its parsing, archiving and hand-over to the committer are left;
* every step of a fetch is bounded (the request's time-outs, the parse budget, each
  store call's :data:`~courtier.cluster.timed_store.STORE_CALL_TIMEOUT`), so a task that
  runs far longer is held by a bug: its host stays busy and out of the refill, and the
  crawl never ends. :meth:`overdue` names each such task once, with where it waits
  (:func:`awaiting`), for the worker to log. It runs every turn of the loop, so it looks
  only at the oldest tasks not named yet (kept in start order: the clock never goes
  back), not at every fetch under way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Coroutine, Iterable
from typing import Any

from courtier.core.clock import Clock
from courtier.frontier.lease import Lease

log = logging.getLogger("courtier.worker")


class InFlight:
    """Fetch tasks and their leases."""

    def __init__(self, wake: Callable[[], None], clock: Clock,
                 unstarted: Callable[[Lease], None] | None = None) -> None:
        self._wake = wake
        self._clock = clock
        #: gives back the lease of a task cancelled before its fetch ran (its slot freed,
        #: its URL returned), as the fetch's own cancellation path does
        self._unstarted = unstarted or _nothing
        self._leases: dict[asyncio.Task[None], Lease] = {}
        #: tasks whose fetch has not begun (created, their first step not run yet)
        self._not_begun: set[asyncio.Task[None]] = set()
        self._answered: set[asyncio.Task[None]] = set()
        #: when each task :meth:`overdue` has not named yet started (clock time), oldest
        #: first
        self._unnamed: dict[asyncio.Task[None], float] = {}

    def __len__(self) -> int:
        return len(self._leases)

    def __bool__(self) -> bool:
        return bool(self._leases)

    def start(self, lease: Lease, fetch: Callable[[Lease], Coroutine[Any, Any, None]]
              ) -> None:
        """Run ``fetch(lease)`` as a task of its own."""
        task = asyncio.create_task(self._begin(lease, fetch))
        self._leases[task] = lease
        self._not_begun.add(task)
        self._unnamed[task] = self._clock.now()
        task.add_done_callback(self._done)

    async def _begin(self, lease: Lease, fetch: Callable[[Lease], Coroutine[Any, Any, None]]
                     ) -> None:
        """The task's first step: from here on the fetch answers for its lease."""
        task = asyncio.current_task()
        if task is not None:
            self._not_begun.discard(task)
        await fetch(lease)

    def answered(self) -> None:
        """The calling fetch has its whole answer (its request is closed at the server)."""
        task = asyncio.current_task()
        if task is not None and task in self._leases:
            self._answered.add(task)

    def _done(self, task: asyncio.Task[None]) -> None:
        lease = self._leases.pop(task, None)
        if task in self._not_begun:  # cancelled before its first step: nothing ran
            self._not_begun.discard(task)
            if lease is not None:
                self._unstarted(lease)
        self._answered.discard(task)
        self._unnamed.pop(task, None)
        self._wake()
        if not task.cancelled() and task.exception() is not None:
            log.error("fetch task failed", exc_info=task.exception())

    def overdue(self, now: float, after: float) -> list[tuple[Lease, float, bool, str]]:
        """Tasks running for ``after`` seconds or more and not named before: each one's
        lease, seconds running, whether it has its answer, and where it waits. Looks at
        the overdue tasks not named yet and at the next one only (not every fetch)."""
        named = []
        for task, started in self._unnamed.items():
            if now - started < after:
                break  # the ones after it started later
            if not task.done():  # a done one leaves with its done-callback
                named.append((task, started))
        out = []
        for task, started in named:
            del self._unnamed[task]
            out.append((self._leases[task], now - started, task in self._answered,
                        awaiting(task)))
        return out

    def leases(self) -> Iterable[Lease]:
        """The lease of every fetch under way."""
        return self._leases.values()

    def host_keys(self) -> set[str]:
        return {lease.host_key for lease in self._leases.values()}

    def running(self) -> int:
        """Tasks not done yet (a cancelled one may still be unwinding)."""
        return sum(not t.done() for t in self._leases)

    def of_hosts(self, shard_of: Callable[[str], int | None],
                 shards: Collection[int]) -> list[tuple[asyncio.Task[None], Lease]]:
        """The fetches whose host (``shard_of(host_key)``) is in ``shards``."""
        return [(task, lease) for task, lease in self._leases.items()
                if shard_of(lease.host_key) in shards]

    def cancel_all(self) -> None:
        for task in list(self._leases):
            task.cancel()

    def cancel_unanswered(self) -> int:
        """Cancel every fetch whose answer has not come (its request may be open at a
        server, or not sent yet; or its task not begun); answered ones finish. Returns how
        many were cancelled."""
        cut = [t for t in self._leases if t not in self._answered and not t.done()]
        for task in cut:
            task.cancel()
        return len(cut)

    async def settle(self) -> None:
        """Wait until every task listed now has ended (cancelled ones included)."""
        if self._leases:
            await asyncio.gather(*self._leases, return_exceptions=True)


def awaiting(task: asyncio.Task[Any]) -> str:
    """Where a suspended task waits: each coroutine of its await chain as
    ``name:line``, outermost first, then what the innermost one awaits."""
    steps = []
    awaited: Any = task.get_coro()
    while awaited is not None and hasattr(awaited, "cr_frame"):
        frame = awaited.cr_frame
        if frame is None:
            break
        steps.append(f"{awaited.cr_code.co_name}:{frame.f_lineno}")
        awaited = awaited.cr_await
    if awaited is not None and not hasattr(awaited, "cr_frame"):
        steps.append(type(awaited).__name__)
    return " > ".join(steps)


def _nothing(lease: Lease) -> None:
    pass
