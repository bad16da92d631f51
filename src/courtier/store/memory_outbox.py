"""The memory store's outbox, registered consumer cursors and audit log, with their
retention (``prune_events``, ``prune_audit``; docs/scale-out.md "Bounded growth").

Positions are handed out in append order and never reused; removal takes the
oldest events first, so what was removed is always a prefix of the positions and
``pruned_through`` is the last of them. Each event also gets the next position of its
shard (``shard_pos``, the per-shard cursor's): one writer at a time, so append order is
commit order in every shard.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from courtier.core.errors import EventsPruned
from courtier.core.records import Event
from courtier.core.shard_cursor import ShardCursor, ShardPage
from courtier.core.urls import shard_of_key
from courtier.store.consumer_floors import floors, holds
from courtier.store.event_counts import EventCounts, payload_counter_names, tally
from courtier.store.shard_reads import advance, check_unpruned, plan_reads

__all__ = ["MemoryAuditLog", "MemoryOutbox"]


class MemoryOutbox:
    """Events in position order, the consumer cursors, and the tallies of every event
    ever appended (removed ones included)."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._last_position = 0
        self.pruned_through = 0
        self.consumers: dict[str, int] = {}
        self.shard_consumers: dict[str, ShardCursor] = {}  # name → per-shard position
        self._tally = tally(())
        self._heads: dict[int, int] = {}  # shard → its last shard_pos
        self._pruned: dict[int, int] = {}  # shard → its highest shard_pos removed
        self._by_shard: dict[int, list[Event]] = {}

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def append(self, url_key: bytes, version: int, created_at: float,
               payload: dict[str, Any]) -> None:
        self._last_position += 1
        shard = shard_of_key(url_key)
        self._heads[shard] = self._heads.get(shard, 0) + 1
        event = Event(self._last_position, url_key, version, created_at, payload, shard,
                      self._heads[shard])
        self._events.append(event)
        self._by_shard.setdefault(shard, []).append(event)
        self._tally.update(payload_counter_names(payload))

    def read(self, after: int, limit: int) -> list[Event]:
        if after < self.pruned_through:
            raise EventsPruned(after, self.pruned_through)
        start = bisect.bisect_right(self._events, after, key=lambda e: e.id)
        return self._events[start:start + max(0, limit)]

    def read_by_shard(self, cursor: ShardCursor, limit: int) -> ShardPage:
        check_unpruned(cursor, self._pruned)
        ranges = plan_reads(cursor, self._heads, limit)
        events: list[Event] = []
        for r in ranges:
            kept = self._by_shard.get(r.shard, [])
            start = bisect.bisect_right(kept, r.after, key=lambda e: e.shard_pos)
            stop = bisect.bisect_right(kept, r.through, key=lambda e: e.shard_pos)
            events += kept[start:stop]
        return ShardPage(events, advance(cursor, ranges))

    def shard_cursor_at(self, position: int) -> ShardCursor:
        """``Store.shard_cursor_at``: ids are commit order here, so each shard's events
        with an id at or below ``position`` are a prefix of its positions."""
        if position < self.pruned_through:
            raise EventsPruned(position, self.pruned_through)
        cursor: dict[int, int] = {}
        for shard, head in self._heads.items():
            kept = self._by_shard.get(shard, [])
            first = bisect.bisect_right(kept, position, key=lambda e: e.id)
            cursor[shard] = kept[first].shard_pos - 1 if first < len(kept) else head
        return ShardCursor(cursor)

    def by_url(self, after: bytes | None, urls: int) -> list[Event]:
        keys = sorted({e.url_key for e in self._events
                       if after is None or e.url_key > after})[:max(0, urls)]
        wanted = set(keys)
        return sorted((e for e in self._events if e.url_key in wanted),
                      key=lambda e: (e.url_key, e.id))

    def counts(self) -> EventCounts:
        return EventCounts.from_counters(self._tally.items())

    def register(self, name: str) -> int:
        return self.consumers.setdefault(name, self.pruned_through)

    def advance(self, name: str, position: int) -> int:
        self.consumers[name] = max(self.consumers.get(name, self.pruned_through), position)
        return self.consumers[name]

    def register_by_shard(self, name: str) -> ShardCursor:
        """A new per-shard consumer starts just above what each shard lost to the retention."""
        return self.shard_consumers.setdefault(name, ShardCursor(self._pruned))

    def advance_by_shard(self, name: str, cursor: ShardCursor) -> ShardCursor:
        start = self.shard_consumers.get(name, ShardCursor(self._pruned))
        self.shard_consumers[name] = start.advanced(cursor)
        return self.shard_consumers[name]

    def prune(self, before: float, limit: int) -> int:
        """Remove the longest prefix (at most ``limit``) of events created before
        ``before``, at or below every registered position and read by every per-shard
        consumer in their shards; with no crawl-wide consumer registered, by shard alone
        (:meth:`_prune_by_shard`)."""
        if not self.consumers:
            return self._prune_by_shard(before, limit)
        lowest = min(self.consumers.values())
        shard_floors = floors(self.shard_consumers.values())
        count = 0
        for event in self._events[:max(0, limit)]:
            if event.created_at >= before or event.id > lowest \
                    or holds(shard_floors, event.shard, event.shard_pos):
                break
            count += 1
        if count:
            self._remove(self._events[:count])
        return count

    def _prune_by_shard(self, before: float, limit: int) -> int:
        """At most ``limit`` of the oldest events created before ``before`` that every
        per-shard consumer has read: an event held in one shard holds no other shard's
        (in each shard what goes is a prefix of its positions: the floor and the clock
        both rise with them)."""
        shard_floors = floors(self.shard_consumers.values())
        doomed: list[Event] = []
        for event in self._events:
            if event.created_at >= before or len(doomed) >= max(0, limit):
                break
            if not holds(shard_floors, event.shard, event.shard_pos):
                doomed.append(event)
        self._remove(doomed)
        return len(doomed)

    def _remove(self, doomed: list[Event]) -> None:
        """Remove ``doomed`` (in id order, in each shard its oldest events), raising
        ``pruned_through`` and each shard's highest position removed first."""
        if not doomed:
            return
        self.pruned_through = max(self.pruned_through, doomed[-1].id)
        removed = Counter(e.shard for e in doomed)
        for shard, n in removed.items():  # the oldest of each shard: a prefix of it
            self._pruned[shard] = self._by_shard[shard][n - 1].shard_pos
            del self._by_shard[shard][:n]
        gone = {e.id for e in doomed}
        self._events = [e for e in self._events if e.id not in gone]


class MemoryAuditLog:
    """The audit rows (one per applied commit) with ids that are never reused."""

    def __init__(self) -> None:
        self._rows: list[dict[str, Any]] = []
        self._last_id = 0

    def append(self, row: Mapping[str, Any]) -> None:
        self._last_id += 1
        self._rows.append({"id": self._last_id, **row})

    def read(self, after: int, limit: int, url_key: bytes | None) -> list[dict[str, Any]]:
        start = bisect.bisect_right(self._rows, after, key=lambda r: int(r["id"]))
        rows = (r for r in self._rows[start:] if url_key is None or r["url_key"] == url_key)
        out: list[dict[str, Any]] = []
        for row in rows:
            if len(out) >= limit:
                break
            out.append({**row, "url_key": row["url_key"].hex()})
        return out

    def prune(self, before: float, limit: int) -> int:
        """Remove the longest prefix (at most ``limit``) of rows fetched before ``before``."""
        count = 0
        for row in self._rows[:max(0, limit)]:
            if row["fetched_at"] >= before:
                break
            count += 1
        del self._rows[:count]
        return count
