"""The retention task (crawl/outbox_retention.py): the cuts it asks the store for, its
bound per run, its duty and its retry after a failure.

Seen red: with ``_batches`` calling only once, the backlog test's first run removed
10,000 events instead of 30,000 (``assert 10000 == 30000``); with the on-duty check
dropped from ``run``, the off-duty worker asked the store 20 times."""

from __future__ import annotations

import asyncio

import pytest

from courtier.core.clock import VirtualClock
from courtier.core.errors import StoreError
from courtier.crawl import outbox_retention as task
from courtier.crawl.outbox_retention import OutboxRetention
from courtier.store.memory import MemoryStore

T0 = 1_700_000_000.0
DAY = 86_400.0


def fill(store: MemoryStore, count: int, at: float) -> None:
    for n in range(count):
        store.events.append(n.to_bytes(4, "big"), 1, at, {"outcome": "ok", "status": 200})


async def test_removes_what_is_older_than_each_retention() -> None:
    clock = VirtualClock(T0)
    store = MemoryStore(clock=clock)
    fill(store, 5, T0 - 8 * DAY)
    fill(store, 3, T0 - 6 * DAY)
    done = await OutboxRetention(store, clock, 7 * DAY, 90 * DAY).run_once()
    assert (done.events, done.audit, done.pruned_through) == (5, 0, 5)
    assert [e.id for e in await store.read_events(5, 100)] == [6, 7, 8]


async def test_a_retention_of_zero_keeps_for_ever() -> None:
    clock = VirtualClock(T0)
    store = MemoryStore(clock=clock)
    fill(store, 4, T0 - 400 * DAY)
    retention = OutboxRetention(store, clock, 0, 0)
    assert not retention.enabled
    assert (await retention.run_once()).events == 0
    assert len(await store.read_events(0, 100)) == 4


async def test_a_run_is_bounded_and_the_backlog_goes_over_several_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(task, "BATCH", 10_000)
    monkeypatch.setattr(task, "BATCHES_PER_RUN", 3)
    clock = VirtualClock(T0)
    store = MemoryStore(clock=clock)
    fill(store, 45_000, T0 - 30 * DAY)
    retention = OutboxRetention(store, clock, 7 * DAY, 90 * DAY)
    first = await retention.run_once()
    assert first.events == 30_000  # three calls of 10,000, then the run stops
    second = await retention.run_once()
    assert second.events == 15_000 and second.pruned_through == 45_000


async def test_only_the_worker_on_duty_prunes_and_a_failure_is_retried() -> None:
    clock = VirtualClock(T0)
    store = MemoryStore(clock=clock)
    fill(store, 30, T0 - 30 * DAY)
    duty = {"on": False}
    calls: list[float] = []
    real = store.prune_events

    async def flaky(before: float, limit: int) -> int:
        calls.append(before)
        if len(calls) == 1:
            raise StoreError("connection lost")
        return await real(before, limit)

    store.prune_events = flaky  # type: ignore[method-assign]
    runner = asyncio.create_task(OutboxRetention(store, clock, 7 * DAY, 90 * DAY,
                                                 on_duty=lambda: duty["on"]).run())
    try:
        for _ in range(20):  # off duty: many periods pass, nothing is asked
            await asyncio.sleep(0)
        assert calls == [] and len(await store.read_events(0, 100)) == 30
        duty["on"] = True
        for _ in range(200):
            await asyncio.sleep(0)
            if await store.events_pruned_through() == 30:
                break
        assert len(calls) >= 2  # the failed run was tried again a period later
        assert await store.events_pruned_through() == 30
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
