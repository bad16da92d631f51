"""The time bound on a cluster worker's store calls (cluster/timed_store.py)."""

from __future__ import annotations

import asyncio

import pytest

from courtier.cluster.timed_store import with_call_timeout
from courtier.core.errors import StoreError
from courtier.sim.loop import run_virtual
from courtier.store.base import Store


class _AnsweringStore:
    """``heartbeat`` waits for the test to answer it; ``counts`` never returns."""

    def __init__(self) -> None:
        self.answer: asyncio.Future[str] | None = None
        self.asked = asyncio.Event()

    async def heartbeat(self) -> str:
        self.answer = asyncio.get_running_loop().create_future()
        self.asked.set()
        return await self.answer

    async def counts(self) -> dict[str, int]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def failing(self) -> None:
        raise StoreError("no connection")


def _timed(store: _AnsweringStore, seconds: float = 30.0) -> Store:
    return with_call_timeout(store, seconds)  # type: ignore[arg-type]


def test_a_cancellation_that_meets_the_answer_is_not_lost() -> None:
    """The caller is cancelled in the loop iteration in which the store answers: the
    caller must see the cancellation. With ``asyncio.wait_for`` (Python 3.11) it got the
    answer instead and went on: the shard coordinator's rounds, cancelled that way by a
    stopping worker, never ended, nor did the worker waiting for them."""
    async def go() -> None:
        backend = _AnsweringStore()
        store = _timed(backend)
        caller = asyncio.create_task(store.heartbeat())  # type: ignore[attr-defined]
        await backend.asked.wait()
        assert backend.answer is not None
        backend.answer.set_result("ok")
        caller.cancel()  # same iteration as the answer
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert caller.cancelled()

    asyncio.run(go())


def test_the_answer_of_a_call_within_its_bound_is_returned() -> None:
    async def go() -> None:
        backend = _AnsweringStore()
        store = _timed(backend)
        caller = asyncio.create_task(store.heartbeat())  # type: ignore[attr-defined]
        await backend.asked.wait()
        assert backend.answer is not None
        backend.answer.set_result("ok")
        assert await caller == "ok"
        with pytest.raises(StoreError, match="no connection"):
            await store.failing()  # type: ignore[attr-defined]

    asyncio.run(go())


def test_a_call_that_hangs_becomes_a_store_error_after_its_bound() -> None:
    async def go() -> None:
        loop = asyncio.get_running_loop()
        store = _timed(_AnsweringStore(), seconds=30.0)
        began = loop.time()
        with pytest.raises(StoreError, match="counts took longer than 30 s"):
            await store.counts()
        assert loop.time() - began >= 30.0
        # the caller is not left cancelling: its next bounded call works as usual
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]

    run_virtual(go())
