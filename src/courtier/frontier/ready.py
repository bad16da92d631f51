"""The frontier's hosts that may start now: best priority first, in arrival order within
a priority.

Level 1 of the frontier (``scheduler.py``) moves a host here when its next start time
has come. A binary heap keyed on (priority, ready time, sequence) cost O(log n) cache
misses per grant: with a million ready hosts, a third of the grant's time. Here each
priority has its own FIFO queue (hosts arrive from the time-ordered waiting heap, so the
earliest-ready host of a priority comes out first), and a small heap holds the
priorities that have a queue: push and pop are O(1) plus O(log p) for p priority
levels in use (a handful).
"""

from __future__ import annotations

import heapq
from collections import deque


class ReadyHosts:
    """(token, host key) entries by priority; stale tokens are the caller's to skip."""

    __slots__ = ("_levels", "_queues", "_size")

    def __init__(self) -> None:
        self._levels: list[int] = []  # negated priorities that have a queue (a heap)
        self._queues: dict[int, deque[tuple[int, str]]] = {}
        self._size = 0

    def push(self, priority: int, token: int, key: str) -> None:
        queue = self._queues.get(priority)
        if queue is None:
            queue = self._queues[priority] = deque()
            heapq.heappush(self._levels, -priority)
        queue.append((token, key))
        self._size += 1

    def pop(self) -> tuple[int, str] | None:
        """The entry of the highest priority that arrived first, or None when empty."""
        levels, queues = self._levels, self._queues
        while levels:
            priority = -levels[0]
            queue = queues[priority]
            if queue:
                self._size -= 1
                return queue.popleft()
            heapq.heappop(levels)
            del queues[priority]
        return None

    def __len__(self) -> int:
        return self._size
