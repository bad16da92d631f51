"""The committer writes a batch's rows only once the archive says its records are durable
(``flush_off_loop`` returned), and the event loop runs on while the archive syncs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from courtier.core.outcome import Outcome
from courtier.core.records import CommitResult, FetchCommit, HostStatsDelta
from courtier.crawl.committer import Committer
from courtier.crawl.metrics import CrawlMetrics
from courtier.crawl.status import CrawlStatus


class _Clock:
    def now(self) -> float:
        return 100.0


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


class _Store:
    def __init__(self, archive: _HeldArchive) -> None:
        self.archive = archive
        self.committed: list[tuple[bool, int]] = []  # (archive durable then, rows)

    async def commit(self, batch: Sequence[FetchCommit],
                     stats: Sequence[HostStatsDelta]) -> CommitResult:
        self.committed.append((self.archive.durable, len(batch)))
        return CommitResult(applied=len(batch), stale=0, new_urls=0)


class _Intake:
    known_skips = 0

    def handed_in(self, keys: Iterable[bytes]) -> None:
        list(keys)

    def batch_started(self) -> int:
        return 0

    def batch_ended(self, generation: int) -> None:
        return None

    def remember(self, keys: Iterable[bytes]) -> None:
        list(keys)


def _result(n: int) -> FetchCommit:
    return FetchCommit(bytes([n]) * 16, f"http://a.test/{n}", "http://a.test", 1, 1, 1,
                       Outcome.OK, 99.0, 200.0, status=200)


async def test_rows_are_committed_only_after_the_archive_synced() -> None:
    archive = _HeldArchive()
    store = _Store(archive)
    committer = Committer(store, archive, _Clock(), _Intake(),  # type: ignore[arg-type]
                          CrawlMetrics(), CrawlStatus(), lambda: None)
    committer.add(_result(1))
    committer.add(_result(2))
    committer.start()
    await archive.syncing.wait()
    # the loop runs on while the archive syncs: more results come in, nothing is written
    committer.add(_result(3))
    for _ in range(20):
        await asyncio.sleep(0)
    assert store.committed == []
    assert committer.committing and committer.durability_lag() == 1.0
    archive.release.set()
    await committer.flush()
    assert store.committed == [(True, 2), (True, 1)]
    assert committer.idle
