"""PayloadLookups: digests of concurrent fetches gathered into one store call.

The fake store's every call waits until the test answers it, so which digests went
into which call, and when the next call starts, is decided by the test, not by time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import pytest

from courtier.core.errors import StoreError
from courtier.dedup.payload_lookups import CALLER_TASK_NAME, PayloadLookups
from courtier.store.base import PayloadLocation, Store

A = ("w-0.warc.gz", 10, "http://a.test/", 1.0)
B = ("w-0.warc.gz", 20, "http://b.test/", 2.0)


@dataclass
class Call:
    digests: list[str]
    _go: asyncio.Event = field(default_factory=asyncio.Event)
    _error: BaseException | None = None
    cancelled: bool = False

    def answer(self) -> None:
        self._go.set()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self._go.set()


class GatedStore:
    """``payload_locations`` of a fixed index, each call held until answered."""

    def __init__(self, index: dict[str, PayloadLocation]) -> None:
        self.index = index
        self.calls: asyncio.Queue[Call] = asyncio.Queue()
        self.in_flight = 0
        self.most_in_flight = 0

    async def payload_locations(self, digests: Sequence[str]) -> dict[str, PayloadLocation]:
        call = Call(list(digests))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.calls.put_nowait(call)
        try:
            await call._go.wait()
        except asyncio.CancelledError:
            call.cancelled = True
            raise
        finally:
            self.in_flight -= 1
        if call._error is not None:
            raise call._error
        return {d: self.index[d] for d in digests if d in self.index}


def lookups_of(store: GatedStore, max_batch: int = 256) -> PayloadLookups:
    return PayloadLookups(cast(Store, store), max_batch=max_batch)


def caller_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == CALLER_TASK_NAME]


async def test_a_lone_digest_is_asked_at_once() -> None:
    store = GatedStore({"a": A})
    lookups = lookups_of(store)
    answer = lookups.find("a")
    call = await store.calls.get()
    assert call.digests == ["a"]
    call.answer()
    assert await answer == A


async def test_digests_asked_in_one_turn_share_one_call() -> None:
    store = GatedStore({"a": A, "b": B})
    lookups = lookups_of(store)
    answers = [lookups.find(d) for d in ("a", "missing", "b")]
    call = await store.calls.get()
    assert call.digests == ["a", "missing", "b"]
    call.answer()
    assert await asyncio.gather(*answers) == [A, None, B]
    assert store.calls.empty()


async def test_digests_asked_during_a_call_wait_for_the_next_one() -> None:
    store = GatedStore({"a": A, "b": B})
    lookups = lookups_of(store)
    first = lookups.find("a")
    call1 = await store.calls.get()
    later = [lookups.find("b"), lookups.find("a"), lookups.find("c")]  # "a" again: next call
    assert store.calls.empty() and not first.done()
    call1.answer()
    assert await first == A
    call2 = await store.calls.get()  # starts when the first ends, without being asked
    assert call2.digests == ["b", "a", "c"]
    assert not any(a.done() for a in later)
    call2.answer()
    assert await asyncio.gather(*later) == [B, A, None]
    assert store.most_in_flight == 1


async def test_a_digest_asked_twice_at_once_is_sent_once() -> None:
    store = GatedStore({"a": A})
    lookups = lookups_of(store)
    answers = [lookups.find("a"), lookups.find("a")]
    call = await store.calls.get()
    assert call.digests == ["a"]
    call.answer()
    assert await asyncio.gather(*answers) == [A, A]


async def test_a_batch_holds_at_most_max_batch_digests() -> None:
    store = GatedStore({"e": A})
    lookups = lookups_of(store, max_batch=2)
    answers = [lookups.find(d) for d in "abcde"]
    batches = []
    for _ in range(3):
        call = await store.calls.get()
        batches.append(call.digests)
        call.answer()
    assert batches == [["a", "b"], ["c", "d"], ["e"]]
    assert await asyncio.gather(*answers) == [None, None, None, None, A]
    assert store.most_in_flight == 1


async def test_a_store_error_answers_not_found_to_the_whole_batch() -> None:
    store = GatedStore({"a": A, "b": B})
    lookups = lookups_of(store)
    answers = [lookups.find("a"), lookups.find("b")]
    call1 = await store.calls.get()
    queued = lookups.find("a")
    call1.fail(StoreError("connection lost"))
    assert await asyncio.gather(*answers) == [None, None]
    call2 = await store.calls.get()  # the next batch is asked as usual
    call2.answer()
    assert await queued == A


async def test_an_unexpected_error_reaches_the_waiters_of_its_batch() -> None:
    store = GatedStore({"a": A})
    lookups = lookups_of(store)
    broken = lookups.find("a")
    call1 = await store.calls.get()
    queued = lookups.find("a")
    call1.fail(RuntimeError("bug"))
    with pytest.raises(RuntimeError, match="bug"):
        await broken
    (await store.calls.get()).answer()
    assert await queued == A


async def test_a_cancelled_waiter_leaves_the_call_running_for_the_others() -> None:
    store = GatedStore({"a": A, "b": B})
    lookups = lookups_of(store)
    gone, kept, same_digest = lookups.find("a"), lookups.find("b"), lookups.find("a")
    call = await store.calls.get()
    gone.cancel()
    call.answer()
    assert await asyncio.gather(kept, same_digest) == [B, A]
    assert gone.cancelled() and not call.cancelled


async def test_a_waiter_awaiting_in_a_task_can_be_cancelled() -> None:
    store = GatedStore({"a": A})
    lookups = lookups_of(store)

    async def fetch() -> PayloadLocation | None:
        return await lookups.find("a")

    waiter = asyncio.create_task(fetch())
    other = lookups.find("a")
    call = await store.calls.get()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    call.answer()
    assert await other == A and not call.cancelled


async def test_a_digest_whose_waiters_all_left_is_not_asked() -> None:
    store = GatedStore({"b": B})
    lookups = lookups_of(store)
    first = lookups.find("a")
    call1 = await store.calls.get()
    withdrawn, wanted = lookups.find("x"), lookups.find("b")
    withdrawn.cancel()
    call1.answer()
    await first
    call2 = await store.calls.get()
    assert call2.digests == ["b"]
    call2.answer()
    assert await wanted == B


async def test_close_answers_everyone_and_leaves_no_task() -> None:
    store = GatedStore({"a": A, "b": B})
    lookups = lookups_of(store)
    in_call = lookups.find("a")
    call = await store.calls.get()
    queued = lookups.find("b")
    assert len(caller_tasks()) == 1
    await lookups.close()
    assert await asyncio.gather(in_call, queued) == [None, None]
    assert call.cancelled and caller_tasks() == []
    assert await lookups.find("a") is None  # closed: the store is not asked again
    assert store.calls.empty() and caller_tasks() == []


async def test_the_call_task_ends_when_nothing_waits() -> None:
    store = GatedStore({"a": A})
    lookups = lookups_of(store)
    answer = lookups.find("a")
    (await store.calls.get()).answer()
    assert await answer == A
    assert caller_tasks() == []  # it ended in the step that answered
    again = lookups.find("b")  # a quiet period's first digest starts a new call
    call = await store.calls.get()
    assert call.digests == ["b"]
    call.answer()
    assert await again is None
    await lookups.close()


def test_a_batch_of_less_than_one_digest_is_refused() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        PayloadLookups(cast(Store, GatedStore({})), max_batch=0)
