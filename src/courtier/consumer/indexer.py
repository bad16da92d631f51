"""The consumer's loop: read a batch of events above the index's per-shard cursor, turn
each into a change of the index, apply the batch with its cursor in one transaction,
repeat.

The feed is any :data:`courtier.events.drain.ShardPageReader` (``GET /v1/events?cursor=``
of the admin API over HTTP, or the same operation run in-process over the crawl's store:
the command line chooses): positions assigned at commit, per shard, so an event that
commits late is read after the ones around it, never skipped, and no sequencer runs.
There is no order across shards; each URL's events come in commit order (a URL lives in
one shard), and the index keeps the newest version of a URL whatever order they arrive in.
Without ``follow`` the loop ends once it has caught up (the cursor stops moving);
with it, it waits ``poll`` seconds and asks again, and a feed that fails (a crawl or
API restarting) is asked again too. ``stop`` ends the loop between batches.

A record that cannot be read (a WARC root not given, a file deleted) stops the run
with an :class:`ArchiveError` after the events before it have been applied with their
cursor: the run can be repeated once the archive is reachable, and nothing is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from courtier.consumer.decide import decide
from courtier.consumer.index_db import Change, CursorMoved, Removal, Reuse, SearchIndex
from courtier.consumer.pages import ArchivedPages
from courtier.core.errors import ArchiveError, ConfigError, CourtierError
from courtier.core.shard_cursor import ShardCursor
from courtier.events.drain import PAGE_SIZE, ShardPageReader

__all__ = ["IndexReport", "Indexer"]

log = logging.getLogger("courtier.consumer")


@dataclass(slots=True)
class IndexReport:
    """What a run did: events read, cursor reached, and per effect / skip reason."""

    events: int = 0
    cursor: ShardCursor = field(default_factory=ShardCursor)
    done: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)

    def line(self, pages: int) -> str:
        parts = [f"{self.done[k]} {k}" for k in
                 ("indexed", "copied", "kept", "removed", "waiting", "stale", "unknown payload")
                 if self.done[k]]
        skipped = sum(self.skipped.values())
        if skipped:
            why = ", ".join(f"{reason} {n}" for reason, n in self.skipped.most_common())
            parts.append(f"{skipped} skipped ({why})")
        effects = "; ".join(parts) if parts else "nothing to change"
        return (f"{self.events} events read: {effects}; "
                f"{pages} pages in the index")


class Indexer:
    """Feeds one :class:`SearchIndex` from one feed (see the module docstring)."""

    def __init__(self, feed: ShardPageReader, pages: ArchivedPages, index: SearchIndex,
                 batch: int = 200) -> None:
        if not 1 <= batch <= PAGE_SIZE:
            raise ConfigError(f"--batch {batch}: give 1 to {PAGE_SIZE} events")
        self.feed, self.pages, self.index, self.batch = feed, pages, index, batch
        self.report = IndexReport(cursor=index.cursor())

    async def run(self, *, follow: bool = False, stop: asyncio.Event | None = None,
                  poll: float = 1.0,
                  on_batch: Callable[[IndexReport], Awaitable[None] | None] | None = None,
                  ) -> IndexReport:
        """Index batch after batch until caught up (or, with ``follow``, until ``stop``);
        ``on_batch`` (awaited if it returns an awaitable) after each committed batch."""
        stop = stop or asyncio.Event()
        failing = False
        while not stop.is_set():
            try:
                moved = await self.step()
            except CursorMoved:
                continue  # another indexer took that batch: go on from its cursor
            except (ArchiveError, ConfigError):
                raise
            except CourtierError as exc:
                if not follow:
                    raise
                if not failing:
                    log.warning("the event feed failed (%s); asking again every %.0f s",
                                exc, poll)
                failing, moved = True, False
            else:
                failing = False
            if moved and on_batch is not None:
                done = on_batch(self.report)
                if done is not None:
                    await done
            if not moved:
                if not follow:
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(poll):  # not wait_for: see timed_store.py
                        await stop.wait()
        return self.report

    async def step(self) -> bool:
        """One batch: read it, apply it with its cursor; whether the cursor moved (False:
        caught up)."""
        start = await asyncio.to_thread(self.index.cursor)
        page = await self.feed(start, self.batch)
        changes: list[Change] = []
        skipped: Counter[str] = Counter()
        taken: dict[int, int] = {}  # shard → position of its last event taken
        count = 0
        try:
            for event in page.events:
                change = await self._change(event, skipped)
                if change is not None:
                    changes.append(change)
                taken[int(event["shard"])] = int(event["shard_pos"])
                count += 1
        except ArchiveError:
            # keep what was done before the unreadable record: the page comes by shard,
            # then position, so in each shard the events taken are all those up to the
            # last one taken; the shards not reached stay where they were
            if taken:
                await self._apply(changes, start, start.advanced(taken), skipped)
                self.report.events += count
            raise
        end = page.cursor.advanced(taken)
        if end == start:
            return False
        await self._apply(changes, start, end, skipped)
        self.report.events += len(page.events)
        return True

    async def _apply(self, changes: list[Change], start: ShardCursor, end: ShardCursor,
                     skipped: Counter[str]) -> None:
        done = await asyncio.to_thread(self.index.apply, changes, start, end)
        self.report.done.update(done)
        self.report.skipped.update(skipped)
        self.report.cursor = end

    async def _change(self, event: dict[str, Any], skipped: Counter[str]) -> Change | None:
        decision = decide(event)
        payload = event["payload"]
        url_key, version = str(event["url_key"]), int(event["version"])
        if decision.action == "read":
            return await self.pages.entry(event)
        if decision.action == "reuse":
            return Reuse(url_key, str(payload.get("url")), version,
                         payload.get("payload_digest"), payload.get("fetched_at"))
        if decision.action == "remove":
            return Removal(url_key, version)
        skipped[decision.reason] += 1
        return None
