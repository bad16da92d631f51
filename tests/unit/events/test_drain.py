"""events/drain.py: paging through the outbox with a fake page reader.

Checked by breaking it: without the ``len(page.events) < ask`` stop the drain asks
again after a short page (the asks list grows), and with ``ask = page_size`` always
a --limit of 2,500 reads 3,000 events.
"""

from __future__ import annotations

from typing import Any

import pytest

from courtier.api.control import MAX_EVENTS_PER_CALL
from courtier.events.drain import PAGE_SIZE, Page, drain


class Outbox:
    """``count`` events with ids 1..count; records each (after, limit) asked."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.asks: list[tuple[int, int]] = []

    async def read(self, after: int, limit: int) -> Page:
        self.asks.append((after, limit))
        events: list[dict[str, Any]] = [{"id": i} for i in
                                        range(after + 1, min(self.count, after + limit) + 1)]
        return Page(events, events[-1]["id"] if events else after)


async def ids(outbox: Outbox, after: int = 0, limit: int | None = None,
              page_size: int = PAGE_SIZE) -> list[int]:
    return [e["id"] async for page in drain(outbox.read, after, limit, page_size)
            for e in page.events]


def test_page_size_is_the_apis_bound() -> None:
    assert PAGE_SIZE == MAX_EVENTS_PER_CALL


async def test_drains_every_event_then_stops_at_the_first_short_page() -> None:
    box = Outbox(2_345)
    assert await ids(box) == list(range(1, 2_346))
    assert box.asks == [(0, 1000), (1000, 1000), (2000, 1000)]


async def test_an_exact_multiple_ends_with_one_empty_ask() -> None:
    box = Outbox(2_000)
    assert await ids(box) == list(range(1, 2_001))
    assert box.asks == [(0, 1000), (1000, 1000), (2000, 1000)]


async def test_limit_caps_the_total_and_the_last_ask() -> None:
    box = Outbox(10_000)
    assert await ids(box, limit=2_500) == list(range(1, 2_501))
    assert box.asks == [(0, 1000), (1000, 1000), (2000, 500)]


async def test_after_and_an_empty_outbox() -> None:
    assert await ids(Outbox(30), after=25, page_size=2) == [26, 27, 28, 29, 30]
    pages = [p async for p in drain(Outbox(0).read, 0)]
    assert pages == []  # an empty page is not yielded


async def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        await ids(Outbox(3), limit=0)
