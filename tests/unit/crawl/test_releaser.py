"""The releaser keeps what a store error refused and sends it first with the next call:
a row handed back is never lost between a failed release and the next one.
(Checked: with the ``except`` branch that keeps the items removed, the first test fails.)
A row handed back due when it already was costs no write (the refill reads rows without
marking them: it is QUEUED at that time in the store already)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from courtier.core.errors import StoreError
from courtier.core.records import DueUrl
from courtier.crawl.releaser import Releaser


def due(n: int) -> DueUrl:
    return DueUrl(url_key=bytes([n]) * 16, url=f"http://a.test/{n}", host_key="http://a.test",
                  shard=3, depth=0, priority=0, version=1, next_fetch_at=10.0 * n)


class FlakyStore:
    """``postpone`` fails ``failures`` times, then records what it was given."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[tuple[list[tuple[bytes, int, float]], dict[int, int]]] = []

    async def postpone(self, items: Sequence[tuple[bytes, int, float]],
                       epochs: Mapping[int, int]) -> None:
        if self.failures:
            self.failures -= 1
            raise StoreError("connection lost")
        self.calls.append((list(items), dict(epochs)))


class Frontier:
    def __init__(self) -> None:
        self.epochs = {3: 7}
        self.released: list[tuple[DueUrl, float]] = []

    def take_released(self) -> list[tuple[DueUrl, float]]:
        out, self.released = self.released, []
        return out


async def test_a_release_refused_by_the_store_goes_first_with_the_next_call() -> None:
    store, frontier = FlakyStore(failures=1), Frontier()
    releaser = Releaser(store, frontier)  # type: ignore[arg-type]
    with pytest.raises(StoreError):
        await releaser.release([(due(1), 15.0)])
    assert releaser.owed == 1
    await releaser.release([(due(2), 26.0)])
    assert releaser.owed == 0
    assert store.calls == [([(due(1).url_key, 1, 15.0), (due(2).url_key, 1, 26.0)], {3: 7})]


async def test_returned_leases_are_released_with_the_epochs_held() -> None:
    store, frontier = FlakyStore(failures=0), Frontier()
    releaser = Releaser(store, frontier)  # type: ignore[arg-type]
    frontier.released = [(due(4), 45.0)]
    await releaser.release_returned()
    await releaser.release_returned()  # nothing new: no call
    assert store.calls == [([(due(4).url_key, 1, 45.0)], {3: 7})]


async def test_a_row_handed_back_due_as_it_was_is_not_written() -> None:
    """Seen red with the filter on ``at > next_fetch_at`` removed: one call, with both."""
    store, frontier = FlakyStore(failures=0), Frontier()
    releaser = Releaser(store, frontier)  # type: ignore[arg-type]
    frontier.released = [(due(4), 40.0), (due(5), 50.0 + 30)]  # as read; later
    await releaser.release_returned()
    assert store.calls == [([(due(5).url_key, 1, 80.0)], {3: 7})]


