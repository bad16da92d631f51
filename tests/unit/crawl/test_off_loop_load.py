"""A load run once in a thread, awaited without holding the event loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from courtier.crawl.off_loop_load import OffLoopLoad


async def test_one_load_in_a_thread_for_every_waiter() -> None:
    """Seen red with ``ready`` calling the load itself (on the loop's thread, which then
    never ran on) and with ``start`` not remembering its task (more than one load)."""
    gate = threading.Event()
    threads: list[int] = []
    loop = asyncio.get_running_loop()
    started = asyncio.Event()

    def load() -> None:
        threads.append(threading.get_ident())
        loop.call_soon_threadsafe(started.set)
        assert gate.wait(30)

    work = OffLoopLoad(load)
    work.start()
    waiters = [asyncio.create_task(work.ready()) for _ in range(3)]
    await asyncio.wait_for(started.wait(), 30)  # the loop runs on while the load is under way
    assert not any(w.done() for w in waiters) and not work.done
    gate.set()
    await asyncio.wait_for(asyncio.gather(*waiters), 30)
    assert work.done and len(threads) == 1 and threads[0] != threading.get_ident()
    await work.ready()  # at once from now on
    assert len(threads) == 1


async def test_a_cancelled_waiter_leaves_the_load_to_the_others() -> None:
    """Seen red with the load's task awaited unshielded (cancelled with the first
    waiter, every later wait raised CancelledError)."""
    gate = threading.Event()
    runs: list[int] = []

    def load() -> None:
        assert gate.wait(30)
        runs.append(1)

    work = OffLoopLoad(load)
    first = asyncio.create_task(work.ready())
    await asyncio.sleep(0)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    gate.set()
    await asyncio.wait_for(work.ready(), 30)
    assert runs == [1]


async def test_a_failed_load_fails_every_wait() -> None:
    def load() -> None:
        raise ImportError("no such module")

    work = OffLoopLoad(load)
    for _ in range(2):
        with pytest.raises(ImportError):
            await asyncio.wait_for(work.ready(), 30)
    assert not work.done


async def test_nothing_to_load_starts_no_thread() -> None:
    """The simulator's virtual clock must not run on while a thread works: with the
    modules imported already, ``ready`` neither calls the load nor waits on a thread.
    Seen red with ``loaded`` not asked (the load ran)."""
    calls: list[int] = []
    work = OffLoopLoad(lambda: calls.append(1), loaded=lambda: True)
    work.start()
    await work.ready()
    assert work.done and calls == []
