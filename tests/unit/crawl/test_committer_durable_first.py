"""The committer writes a batch's rows only once the archive says its records are durable
(``flush_off_loop`` returned), and the event loop runs on while the archive syncs.
"""

from __future__ import annotations

import asyncio

from courtier.crawl.committer import Committer
from courtier.crawl.metrics import CrawlMetrics
from courtier.crawl.status import CrawlStatus
from tests.unit.crawl.committer_fakes import CountingIntake, ManualClock, RecordingStore, result


class _HeldArchive:
    """An archive whose sync waits until the test lets it end."""

    def __init__(self) -> None:
        self.syncing = asyncio.Event()
        self.release = asyncio.Event()
        self.durable = False

    async def flush_off_loop(self) -> None:
        self.syncing.set()
        await self.release.wait()
        self.durable = True


async def test_rows_are_committed_only_after_the_archive_synced() -> None:
    archive = _HeldArchive()
    store = RecordingStore(archive)
    committer = Committer(store, archive, ManualClock(), CountingIntake(),  # type: ignore[arg-type]
                          CrawlMetrics(), CrawlStatus(), lambda: None)
    committer.add(result(1))
    committer.add(result(2))
    committer.start()
    await archive.syncing.wait()
    # the loop runs on while the archive syncs: more results come in, nothing is written
    committer.add(result(3))
    for _ in range(20):
        await asyncio.sleep(0)
    assert store.committed == []
    assert committer.committing and committer.durability_lag() == 1.0
    archive.release.set()
    await committer.flush()
    assert [(durable, rows) for durable, rows, _ in store.committed] == [(True, 2), (True, 1)]
    assert committer.idle
