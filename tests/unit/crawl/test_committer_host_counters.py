"""The per-host counters ride with a commit batch at most every ``HOST_STATS_EVERY``
and with every flush, and none is lost or written twice on the way."""

from __future__ import annotations

import asyncio

from courtier.core.records import HostStatsDelta
from courtier.crawl.committer import HOST_STATS_EVERY, Committer
from courtier.crawl.metrics import CrawlMetrics
from courtier.crawl.status import CrawlStatus
from tests.unit.crawl.committer_fakes import (
    CountingIntake,
    DurableArchive,
    ManualClock,
    RecordingStore,
    result,
)


def _committer(clock: ManualClock, store: RecordingStore) -> Committer:
    return Committer(store, DurableArchive(), clock, CountingIntake(),  # type: ignore[arg-type]
                     CrawlMetrics(), CrawlStatus(), lambda: None)


def _fetched(committer: Committer, host: str, n: int) -> None:
    stats = committer.host_stats(host, 1)
    stats.fetched += n
    stats.bytes += 100 * n
    stats.status_2xx += n


async def _committed(committer: Committer) -> None:
    """Let the commit task started last run to its end (no flush: that writes counters)."""
    for _ in range(100):
        if not committer.committing:
            return
        await asyncio.sleep(0)
    raise AssertionError("the commit task did not end")


def _totals(written: list[HostStatsDelta]) -> dict[str, tuple[int, int, int]]:
    out: dict[str, tuple[int, int, int]] = {}
    for d in written:
        f, b, s = out.get(d.host_key, (0, 0, 0))
        out[d.host_key] = (f + d.fetched, b + d.bytes, s + d.status_2xx)
    return out


async def test_batches_between_two_writes_carry_no_counters() -> None:
    clock, store = ManualClock(), RecordingStore()
    committer = _committer(clock, store)
    for n in range(1, 4):  # three batches within HOST_STATS_EVERY of the start
        committer.add(result(n))
        _fetched(committer, "a.test", 1)
        clock.at += HOST_STATS_EVERY / 4
        committer.start()
        await _committed(committer)
    assert [stats for _, _, stats in store.committed] == [[], [], []]
    # the next batch after HOST_STATS_EVERY carries all three fetches, summed, once
    clock.at += HOST_STATS_EVERY / 4
    committer.add(result(4))
    committer.start()
    await _committed(committer)
    assert [len(stats) for _, _, stats in store.committed] == [0, 0, 0, 1]
    assert _totals(store.committed[-1][2]) == {"a.test": (3, 300, 3)}


async def test_a_flush_writes_every_counter_and_none_twice() -> None:
    clock, store = ManualClock(), RecordingStore()
    committer = _committer(clock, store)
    committer.add(result(1))
    _fetched(committer, "a.test", 2)
    _fetched(committer, "b.test", 1)
    await committer.flush()  # a handover drain or a stop: everything durable, now
    committer.add(result(2, "http://b.test"))
    _fetched(committer, "b.test", 4)
    clock.at += 2 * HOST_STATS_EVERY
    committer.start()
    await _committed(committer)
    await committer.flush()  # nothing left: no commit, no counter written again
    written = [d for _, _, stats in store.committed for d in stats]
    assert len(store.committed) == 2
    assert _totals(written) == {"a.test": (2, 200, 2), "b.test": (5, 500, 5)}


async def test_counters_alone_are_written_by_a_flush() -> None:
    clock, store = ManualClock(), RecordingStore()
    committer = _committer(clock, store)
    _fetched(committer, "a.test", 1)  # e.g. a fetch that failed: no result to commit
    await committer.flush()
    assert [(rows, _totals(stats)) for _, rows, stats in store.committed] == [
        (0, {"a.test": (1, 100, 1)})]


async def test_a_quiet_worker_writes_its_counters_once_they_are_due() -> None:
    clock, store = ManualClock(), RecordingStore()
    committer = _committer(clock, store)
    committer.add(result(1))
    _fetched(committer, "a.test", 1)
    committer.maybe_start(clock.now(), fetches_running=False)
    await _committed(committer)
    _fetched(committer, "a.test", 2)  # then nothing more to commit: the crawl is quiet
    clock.at += HOST_STATS_EVERY / 2
    committer.maybe_start(clock.now(), fetches_running=False)
    await _committed(committer)
    assert len(store.committed) == 1  # not due yet: no commit for the counters alone
    clock.at += HOST_STATS_EVERY / 2
    committer.maybe_start(clock.now(), fetches_running=False)
    await _committed(committer)
    assert [(rows, _totals(stats)) for _, rows, stats in store.committed] == [
        (1, {}), (0, {"a.test": (3, 300, 3)})]
    committer.maybe_start(clock.now() + HOST_STATS_EVERY, fetches_running=False)
    await _committed(committer)
    assert len(store.committed) == 2  # nothing left to write
