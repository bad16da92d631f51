"""Workers started together take their first shards together, ordered by events, not time.

A worker's coordinator plans over the workers it finds live in the store. The first of
several workers started at once finds itself alone, takes all 1024 shards and hands
most of them over a moment later, when the others have registered: drains, clock
saves, and a stall of the crawl's first seconds. The start-up quorum
(``--expect-workers``, :class:`~courtier.cluster.coordinator.ShardCoordinator`) waits for
that many live workers, but for at most one lease TTL: a worker whose start takes
longer (a busy machine, many workers, a long WARC recovery) still causes the handover.

The children of one ``crawl --workers N`` need no clock: their parent knows each of
them. A :class:`StartGate` is what a coordinator asks before its first lease. It tells
the gate once its own first heartbeat is in the store (:meth:`StartGate.registered`),
and takes no shard until the gate :meth:`~StartGate.is_open`. The parent
(:class:`GateKeeper`) opens it when every child has registered — each child's plan then
counts all N, so each takes only its own share. A child that ended without registering
is no longer waited for: the others split the shards without it rather than wait for a
worker that will not come. A child's side is :class:`SiblingGate`: a flag the parent sets,
and one message to the parent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

__all__ = ["Flag", "GateKeeper", "SiblingGate", "StartGate"]


class StartGate(Protocol):
    """What a coordinator asks before it takes its first shard."""

    def registered(self) -> None:
        """This worker's heartbeat is in the store (called after each heartbeat until the
        gate opens; only the first call counts)."""

    def is_open(self) -> bool:
        """True once this worker may take shards: every worker started with it has
        registered or ended. Never closes again."""


class Flag(Protocol):
    """A flag shared between processes (``multiprocessing`` ``Event``)."""

    def is_set(self) -> bool: ...

    def set(self) -> None: ...


class SiblingGate:
    """A child's :class:`StartGate`: ``announce`` tells the parent it registered (once);
    the parent sets ``opened``."""

    def __init__(self, opened: Flag, announce: Callable[[], None]) -> None:
        self._opened = opened
        self._announce = announce
        self._announced = False

    def registered(self) -> None:
        if not self._announced:
            self._announced = True
            self._announce()

    def is_open(self) -> bool:
        return self._opened.is_set()


class GateKeeper:
    """The parent's side: opens ``opened`` once every child named in ``names`` has
    registered or ended."""

    def __init__(self, names: Iterable[str], opened: Flag) -> None:
        self._waiting = set(names)
        self._opened = opened
        #: children that ended before registering (no longer waited for)
        self.gone: list[str] = []

    @property
    def waiting(self) -> list[str]:
        """The children still awaited (sorted); empty once the gate is open."""
        return sorted(self._waiting)

    def registered(self, name: str) -> None:
        """``name``'s first heartbeat is in the store."""
        self._waiting.discard(name)
        self._open_when_none_awaited()

    def ended(self, alive: Mapping[str, bool]) -> None:
        """Look at which children still run: one that ended without registering is no
        longer awaited."""
        gone = sorted(name for name in self._waiting if not alive.get(name, False))
        self.gone += gone
        self._waiting -= set(gone)
        self._open_when_none_awaited()

    def _open_when_none_awaited(self) -> None:
        if not self._waiting and not self._opened.is_set():
            self._opened.set()
