"""Reading the outbox in pages: every event after a cursor, up to now or up to a cap.

The admin API answers at most :data:`PAGE_SIZE` events per call (``GET /v1/events``
stays bounded), so a reader that wants "everything since id N" asks page after
page. :func:`drain` does that over any page reader (the API over HTTP, or the
same operation run in-process over the store) and yields each page's events
with the cursor after them, so the caller prints a page and saves its cursor
before the next is asked for.

"Up to now": the drain stops at the first page shorter than it asked for, i.e.
once it has caught up with the outbox. Events appended while it reads may be
included (the outbox only grows, ids only increase), never skipped: the next
drain from the saved cursor starts after the last event printed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from courtier.core.shard_cursor import ShardCursor

__all__ = ["PAGE_SIZE", "Page", "PageReader", "ShardFeedPage", "ShardPageReader", "drain"]

#: events per call, the API's bound (``MAX_EVENTS_PER_CALL``)
PAGE_SIZE: Final = 1_000


@dataclass(frozen=True, slots=True)
class Page:
    """One answer of ``GET /v1/events``: its events and the cursor after them."""

    events: list[dict[str, Any]]
    next_after: int


#: ``(after, limit) -> Page``: events with ``id > after``, at most ``limit`` of them;
#: raises on failure (the drain stops there, with the pages already yielded printed)
PageReader = Callable[[int, int], Awaitable[Page]]


@dataclass(frozen=True, slots=True)
class ShardFeedPage:
    """One answer of ``GET /v1/events?cursor=TOKEN``: its events (each with ``shard`` and
    ``shard_pos``; by shard, then position) and the cursor to read on from. The cursor may
    move with fewer events than asked for (positions left empty): the feed is caught up
    only when it stops moving."""

    events: list[dict[str, Any]]
    cursor: ShardCursor


#: ``(cursor, limit) -> ShardFeedPage``: events above the per-shard ``cursor``, at most
#: ``limit`` positions' worth; raises on failure
ShardPageReader = Callable[[ShardCursor, int], Awaitable[ShardFeedPage]]


async def drain(read: PageReader, after: int, limit: int | None = None,
                page_size: int = PAGE_SIZE) -> AsyncIterator[Page]:
    """Pages of events after ``after`` in id order until the outbox is caught up, or
    until ``limit`` events (any positive number; None: no cap) have been yielded.
    Each page asks for at most ``page_size`` events; an empty page is not yielded."""
    if limit is not None and limit < 1:
        raise ValueError("limit must be a positive number of events")
    if page_size < 1:
        raise ValueError("page_size must be >= 1")
    left = limit
    while True:
        ask = page_size if left is None else min(page_size, left)
        page = await read(after, ask)
        if page.events:
            after = page.next_after
            yield page
        if left is not None:
            left -= len(page.events)
            if left <= 0:
                return
        if len(page.events) < ask:
            return
