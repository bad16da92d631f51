"""Exact-duplicate lookups of many fetches gathered into one store query.

Every fetched 2xx page asks where its payload digest was archived first. Asked one
by one, that is a store round trip per page (a PostgreSQL transaction, a hop to the
SQLite thread). :class:`PayloadLookups` gathers the digests of concurrent fetches
and asks :meth:`~courtier.store.base.Store.payload_locations` for all of them at once.

Batching comes from load, not from a timer: at most one store call is in flight;
digests asked while it runs wait for the next call, which starts as soon as the
running one ends, with up to ``max_batch`` digests (the rest wait for the call
after). When the crawl is quiet there is no added latency: the first digest starts
the call task, which runs on the next turn of the event loop, so digests asked in
the same turn share its call and no timer is ever waited for.

A failed call (:class:`~courtier.core.errors.StoreError`) answers "not found" to every
digest of its batch: the page is archived as a full response record, never lost.
A waiter that is cancelled (a fenced or stopped fetch) leaves the batch running for
the others. :meth:`close` ends the call task and answers "not found" to whoever is
still waiting; later lookups answer "not found" without asking the store.
"""

from __future__ import annotations

import asyncio
import logging

from courtier.core.errors import StoreError
from courtier.core.logs import log_event
from courtier.store.base import PayloadLocation, Store

__all__ = ["CALLER_TASK_NAME", "MAX_LOOKUP_BATCH", "PayloadLookups"]

log = logging.getLogger("courtier.dedup")

#: digests per store call; the rest wait for the next call
MAX_LOOKUP_BATCH = 256
#: the name of the task that makes the store calls (one at most, while digests wait)
CALLER_TASK_NAME = "payload-lookups"

_Answer = asyncio.Future[PayloadLocation | None]


class PayloadLookups:
    """``await lookups.find(digest)``: the first archived copy of a payload, or None.

    :meth:`find` queues the digest before it returns (it is not a coroutine), so the
    order of calls is the order digests join batches."""

    def __init__(self, store: Store, max_batch: int = MAX_LOOKUP_BATCH) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self._store = store
        self._max_batch = max_batch
        #: digests not sent yet, in the order first asked, each with its waiters
        self._waiting: dict[str, list[_Answer]] = {}
        self._caller: asyncio.Task[None] | None = None
        self._closed = False

    def find(self, digest: str) -> _Answer:
        """Queue ``digest`` now; the answer, to await: where this payload was archived
        first, or None when unknown or when the store could not be asked (a failed call,
        or after :meth:`close`). Cancelling the answer withdraws this one waiter."""
        answer: _Answer = asyncio.get_running_loop().create_future()
        if self._closed:
            answer.set_result(None)
            return answer
        self._waiting.setdefault(digest, []).append(answer)
        if self._caller is None:
            self._caller = asyncio.create_task(self._call_while_waiting(),
                                               name=CALLER_TASK_NAME)
        return answer

    async def close(self) -> None:
        """Stop asking the store; everyone still waiting is answered None."""
        self._closed = True
        caller, self._caller = self._caller, None
        if caller is not None:
            caller.cancel()
            await asyncio.wait([caller])  # our own cancellation still reaches us
        for answers in self._waiting.values():
            _settle(answers, None)
        self._waiting.clear()

    async def _call_while_waiting(self) -> None:
        while self._waiting:
            batch = self._next_batch()
            if batch:
                await self._call(batch)
        self._caller = None

    def _next_batch(self) -> dict[str, list[_Answer]]:
        """Up to ``max_batch`` digests off the front of the queue; digests whose every
        waiter was cancelled meanwhile are dropped, not asked."""
        batch: dict[str, list[_Answer]] = {}
        while self._waiting and len(batch) < self._max_batch:
            digest = next(iter(self._waiting))
            answers = self._waiting.pop(digest)
            if not all(a.done() for a in answers):
                batch[digest] = answers
        return batch

    async def _call(self, batch: dict[str, list[_Answer]]) -> None:
        found: dict[str, PayloadLocation] = {}
        try:
            found = await self._store.payload_locations(list(batch))
        except StoreError as exc:
            log_event(log, logging.WARNING, "payload_lookup_failed",
                      "payload lookup of %d digests failed; archived as full records: %s",
                      len(batch), exc, reason=str(exc))
        except Exception as exc:  # a bug, not the store's absence: its waiters see it
            for answers in batch.values():
                for answer in answers:
                    if not answer.done():
                        answer.set_exception(exc)
        finally:  # also when closed mid-call: nobody of this batch is left waiting
            for digest, answers in batch.items():
                _settle(answers, found.get(digest))


def _settle(answers: list[_Answer], location: PayloadLocation | None) -> None:
    for answer in answers:
        if not answer.done():
            answer.set_result(location)
