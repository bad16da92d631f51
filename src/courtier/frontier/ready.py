"""The frontier's hosts that may start now: mostly best priority first, with regular turns
for the lower priorities; in arrival order within a priority.

Level 1 of the frontier (``scheduler.py``) moves a host here when its next start time
has come. Each priority has its own FIFO queue (hosts arrive from the time-ordered
waiting heap, so the earliest-ready host of a priority comes out first), and a sorted
list holds the priorities that have a queue (a handful: push and pop are O(1) plus a
bisection and a list insert or delete over those few levels).

**Priority turns.** Of every :data:`TURN_EVERY` entries taken, ``TURN_EVERY − 1`` come
from the best priority that has a ready host; the last one, the *turn*, comes from a
lower priority that has one. The lower priorities take the turns in order, from the
highest down, then round again, so while ``L`` priorities have ready hosts each of the
``L − 1`` lower ones gets one entry in every ``TURN_EVERY × (L − 1)``: with 20 and three
priorities in use, the best gets 19 of 20, the other two one in 40 each. A host that is
``m``-th in its priority's queue is taken within ``m`` of its priority's turns, long
before its URLs are overdue (``OVERDUE_AFTER``, 7 days, after which they outrank all
else). When no lower priority has a ready host the turn goes to the best, so no grant
is lost. ``turn_every=None`` is strict priority (no turns). An entry the caller finds
stale (the host was rescheduled since) is handed back with :meth:`ReadyHosts.skipped`:
it does not count, so a turn spent on a stale entry is taken again by the next.

Why 1 in 20: see docs/design.md, "Priority turns" (measured in the freshness simulator
through the frontier, ``courtier.sim.freshness.run_frontier_freshness``: value-weighted
freshness above strict priority's in each of 8 runs, the longest wait of a host as long
or shorter in 7). A host's priority is that of its best URL, the overdue boost included
(``host.OVERDUE_BOOST``): overdue URLs make priorities of their own, above the others.
"""

from __future__ import annotations

import bisect
from collections import deque

#: one entry in every TURN_EVERY goes to a lower priority than the best that has a
#: ready host (the lower priorities in turn, highest first)
TURN_EVERY = 20


class ReadyHosts:
    """(token, host key) entries by priority; stale tokens are the caller's to skip."""

    __slots__ = ("_last_turn", "_levels", "_prev_turn", "_queues", "_size", "_taken",
                 "_turn_every")

    def __init__(self, turn_every: int | None = TURN_EVERY) -> None:
        if turn_every is not None and turn_every < 2:
            raise ValueError(f"turn_every must be at least 2 (or None), got {turn_every}")
        self._levels: list[int] = []  # priorities that have a queue, ascending
        self._queues: dict[int, deque[tuple[int, str]]] = {}
        self._size = 0
        self._turn_every = turn_every
        self._taken = 0  # entries taken since the last turn
        self._last_turn: int | None = None  # the priority that had the last turn
        self._prev_turn: int | None = None  # _last_turn before the last turn

    def push(self, priority: int, token: int, key: str) -> None:
        queue = self._queues.get(priority)
        if queue is None:
            queue = self._queues[priority] = deque()
            bisect.insort(self._levels, priority)
        queue.append((token, key))
        self._size += 1

    def pop(self) -> tuple[int, str] | None:
        """The next entry (the first of the best priority, or of a lower one on its
        turn), or None when empty."""
        levels = self._levels
        if not levels:
            return None
        index = len(levels) - 1
        every = self._turn_every
        if every is not None:
            taken = self._taken + 1
            if taken < every:
                self._taken = taken
            else:
                self._taken = 0
                self._prev_turn = self._last_turn
                if index:
                    index = self._turn_index(levels)
        priority = levels[index]
        queue = self._queues[priority]
        entry = queue.popleft()
        if not queue:
            del levels[index]
            del self._queues[priority]
        self._size -= 1
        return entry

    def skipped(self) -> None:
        """The entry just popped was stale: it does not count towards the turns."""
        every = self._turn_every
        if every is None:
            return
        if self._taken:
            self._taken -= 1
        else:  # it was a turn: the next pop takes it again
            self._taken = every - 1
            self._last_turn = self._prev_turn

    def _turn_index(self, levels: list[int]) -> int:
        """The lower priority whose turn it is: the highest below the last turn's, or,
        when none is (or the last is no longer below the best), the highest below the best."""
        last = self._last_turn
        best_lower = len(levels) - 2
        index = best_lower if last is None else bisect.bisect_left(levels, last) - 1
        if not 0 <= index <= best_lower:
            index = best_lower
        self._last_turn = levels[index]
        return index

    def __len__(self) -> int:
        return self._size
