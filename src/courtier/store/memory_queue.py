"""The two-level ready queue of :class:`courtier.store.memory.MemoryStore`.

It holds the QUEUED rows only, in the shape the refill reads them
(``load_due`` in :mod:`courtier.store.base`):

* per host ``(shard, host_key)``: one heap per priority level of
  ``(next_fetch_at, depth, url_key)``. Within a level the heap order is the
  spec's row order (rows overdue by ``OVERDUE_AFTER`` form a prefix, because
  overdue means "earliest"), so a k-way merge of the levels yields the rows
  best first without looking at the rest;
* the exact host queue ``hosts[(shard, host_key)] = (next_due_at,
  best_priority)`` (the min ``next_fetch_at`` and max priority over the
  host's QUEUED rows), indexed per shard by one heap per best-priority level
  of ``(next_due_at, host_key)``; again a k-way merge yields the ready hosts
  best first.

Heaps are lazy: an entry carries a sequence number (rows) or token (hosts)
and is skipped when it no longer matches; a heap is rebuilt when its garbage
outgrows its live entries. A refill therefore costs about
``(levels + rows returned + hosts walked) × log``, independent of the backlog.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Sequence

HostId = tuple[int, str]  # (shard, host_key)
_RowEntry = tuple[float, int, bytes, int]  # next_fetch_at, depth, url_key, seq
_HostEntry = tuple[float, str, int]  # next_due_at, host_key, token
_SLACK = 32  # garbage tolerated per heap before it is rebuilt


class ReadyQueue:
    """QUEUED rows by host and priority level, and the exact per-shard host queue."""

    def __init__(self) -> None:
        self._seq = 0
        self._member: dict[bytes, tuple[HostId, int, int]] = {}  # key → (host, level, seq)
        self._rows: dict[HostId, dict[int, list[_RowEntry]]] = {}
        self._row_counts: dict[HostId, dict[int, int]] = {}
        self.hosts: dict[HostId, tuple[float, int]] = {}  # exact (next_due_at, best_priority)
        self._token: dict[HostId, int] = {}
        self._host_heaps: dict[int, dict[int, list[_HostEntry]]] = {}
        self._host_counts: dict[int, dict[int, int]] = {}

    def __len__(self) -> int:
        return len(self._member)

    # -- rows -------------------------------------------------------------

    def add(self, key: bytes, host: HostId, priority: int, next_fetch_at: float,
            depth: int) -> None:
        """A row entered QUEUED (or changed while QUEUED: it is re-indexed)."""
        self._drop(key)
        self._seq += 1
        self._member[key] = (host, priority, self._seq)
        levels = self._rows.setdefault(host, {})
        heapq.heappush(levels.setdefault(priority, []), (next_fetch_at, depth, key, self._seq))
        counts = self._row_counts.setdefault(host, {})
        counts[priority] = counts.get(priority, 0) + 1
        self._refresh(host)

    def remove(self, key: bytes) -> None:
        """A row left QUEUED."""
        host = self._drop(key)
        if host is not None:
            self._refresh(host)

    def _drop(self, key: bytes) -> HostId | None:
        member = self._member.pop(key, None)
        if member is None:
            return None
        host, level, _ = member
        counts, levels = self._row_counts[host], self._rows[host]
        counts[level] -= 1
        if counts[level] == 0:
            del counts[level], levels[level]
            if not counts:
                del self._row_counts[host], self._rows[host]
        elif len(levels[level]) > 2 * counts[level] + _SLACK:
            levels[level] = [e for e in levels[level] if self._live_row(e)]
            heapq.heapify(levels[level])
        return host

    def _live_row(self, entry: _RowEntry) -> bool:
        member = self._member.get(entry[2])
        return member is not None and member[2] == entry[3]

    def _row_top(self, heap: list[_RowEntry]) -> _RowEntry | None:
        while heap and not self._live_row(heap[0]):
            heapq.heappop(heap)
        return heap[0] if heap else None

    # -- hosts ------------------------------------------------------------

    def _refresh(self, host: HostId) -> None:
        """Recompute the host's (next_due_at, best_priority) from its level heaps."""
        levels = self._rows.get(host)
        old = self.hosts.get(host)
        new: tuple[float, int] | None = None
        if levels:
            tops = [self._row_top(heap) for heap in levels.values()]
            new = (min(top[0] for top in tops if top is not None), max(levels))
        if new == old:
            return
        shard = host[0]
        if old is not None:
            self._count_host(shard, old[1], -1)
        if new is None:
            del self.hosts[host], self._token[host]
            return
        self._seq += 1
        self.hosts[host], self._token[host] = new, self._seq
        heap = self._host_heaps.setdefault(shard, {}).setdefault(new[1], [])
        heapq.heappush(heap, (new[0], host[1], self._seq))
        self._count_host(shard, new[1], +1)

    def _count_host(self, shard: int, level: int, delta: int) -> None:
        counts, heaps = self._host_counts.setdefault(shard, {}), self._host_heaps[shard]
        counts[level] = counts.get(level, 0) + delta
        if counts[level] == 0:
            del counts[level], heaps[level]
        elif len(heaps[level]) > 2 * counts[level] + _SLACK:
            heaps[level] = [e for e in heaps[level] if self._live_host(shard, e)]
            heapq.heapify(heaps[level])

    def _live_host(self, shard: int, entry: _HostEntry) -> bool:
        return self._token.get((shard, entry[1])) == entry[2]

    def _host_top(self, shard: int, heap: list[_HostEntry]) -> _HostEntry | None:
        while heap and not self._live_host(shard, heap[0]):
            heapq.heappop(heap)
        return heap[0] if heap else None

    def earliest(self, shards: Collection[int]) -> float | None:
        """The smallest next_due_at of the hosts of these shards (None if none)."""
        best: float | None = None
        for shard in set(shards):
            for heap in self._host_heaps.get(shard, {}).values():
                top = self._host_top(shard, heap)
                if top is not None and (best is None or top[0] < best):
                    best = top[0]
        return best

    # -- the refill -------------------------------------------------------

    def take(self, shards: Sequence[int], now: float, overdue_before: float, limit: int,
             per_host_limit: int, skip_hosts: Collection[str]) -> list[bytes]:
        """Remove and return the url_keys ``load_due`` selects, in walk order."""
        merge: list[tuple[tuple[bool, int, float, str, int], int]] = []

        def push_head(shard: int, level: int) -> None:
            top = self._host_top(shard, self._host_heaps[shard][level])
            if top is not None and top[0] <= now:
                heapq.heappush(merge, ((top[0] >= overdue_before, -level, top[0], top[1],
                                        shard), level))

        for shard in set(shards):
            for level in self._host_heaps.get(shard, {}):
                push_head(shard, level)
        taken: list[bytes] = []
        walked: list[tuple[int, int, _HostEntry]] = []
        while merge and len(taken) < limit:
            (_, _, _, host_key, shard), level = heapq.heappop(merge)
            entry = heapq.heappop(self._host_heaps[shard][level])
            walked.append((shard, level, entry))
            push_head(shard, level)
            if host_key not in skip_hosts:
                want = min(per_host_limit, limit - len(taken))
                taken.extend(self._take_rows((shard, host_key), now, overdue_before, want))
        for shard, level, entry in walked:  # hosts popped during the walk go back first
            heapq.heappush(self._host_heaps[shard][level], entry)
        for shard, _, entry in walked:
            self._refresh((shard, entry[1]))
        return taken

    def _take_rows(self, host: HostId, now: float, overdue_before: float,
                   want: int) -> list[bytes]:
        levels = self._rows[host]
        merge: list[tuple[tuple[bool, int, float, int, bytes], int]] = []

        def push_head(level: int) -> None:
            top = self._row_top(levels[level])
            if top is not None and top[0] <= now:
                heapq.heappush(merge, ((top[0] >= overdue_before, -level, top[0], top[1],
                                        top[2]), level))

        for level in levels:
            push_head(level)
        out: list[bytes] = []
        while merge and len(out) < want:
            (*_, key), level = heapq.heappop(merge)
            heapq.heappop(levels[level])
            out.append(key)
            push_head(level)
        for key in out:  # bookkeeping only: the host is refreshed by take()
            self._drop(key)
        return out
