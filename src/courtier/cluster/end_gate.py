"""Workers that finish a crawl together leave together: none takes the shards of another
that left because the crawl was over.

A one-shot worker of a cluster ends when its look (``crawl/pacer.py``) finds the whole
crawl over: nothing due in its shards, no URL SCHEDULED anywhere, no unfinished cycle of
any shard due within ``--linger``. The workers look at different moments, a second or
more apart. The first to find the crawl over used to leave at once and release its
shards; the others, a look away from the same finding, gained them at their next
coordinator round (every ``--lease-ttl``/6), reset, indexed and refilled them, found
nothing, and left in turn, their shards gained by the last ones: up to 1,004 shard
handovers at the end of a crawl of ``--workers 8 --lease-ttl 2``, hundreds at other
settings (docs/scale-out.md, "The end of a crawl"). Two rules end that:

* **A worker whose last look found the crawl over takes no free shard.** Its
  :class:`CrawlEnd` says so to its coordinator, which still renews what it holds but
  acquires nothing it does not hold. Nothing is lost by it: a look that finds work — a
  URL due in its shards, one SCHEDULED anywhere (a sibling's fetch, or the rows of a
  worker killed mid-crawl), an unfinished cycle of any shard due within ``--linger`` —
  makes the worker take shards again from its next round, so the shards of a worker that
  died are taken over as ever once their leases lapse, and those of one that stopped (a
  signal, ``--max-pages``) with work left are gained by the others.
* **The children of ``crawl --workers N`` leave together.** A child whose look finds the
  crawl over says so to its parent (:class:`SiblingEndGate`) and goes on — heartbeats,
  renewals, a look about every second — instead of leaving; a look that finds work, or a
  fetch it starts, takes its word back. It leaves at a look that finds the crawl over
  once the parent (:class:`EndKeeper`) has heard every child say so, or end (a child
  that died or stopped is not waited for). So none leaves while a sibling still sees
  work; and the others, having each found the crawl over too, take none of its shards.

Nothing here is ordered by time: the looks are the pacer's, the gate opens on the
children's words and ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from courtier.cluster.start_gate import Flag

__all__ = ["CrawlEnd", "EndGate", "EndKeeper", "SiblingEndGate"]


class EndGate(Protocol):
    """What a worker started with others by one launcher asks before it leaves a crawl it
    found over."""

    def over(self) -> None:
        """This worker's look found the crawl over (said once per change)."""

    def busy(self) -> None:
        """It found work since it said the crawl was over (said once per change)."""

    def is_open(self) -> bool:
        """True once every worker started with this one has said the crawl is over (or
        ended). Never closes again."""


class CrawlEnd:
    """One worker's verdict on the crawl's end, from its last look: the loop writes it,
    the coordinator reads it (:meth:`is_over`: no free shard is taken), and the
    siblings' gate, if any, hears each change.

    Owns: the verdict. Alone (no gate) a worker may leave as soon as it finds the crawl
    over."""

    def __init__(self, gate: EndGate | None = None) -> None:
        self._gate = gate
        self._over = False

    def is_over(self) -> bool:
        """The last look found the crawl over, and no fetch has started since."""
        return self._over

    def found_over(self) -> None:
        if not self._over:
            self._over = True
            if self._gate is not None:
                self._gate.over()

    def found_work(self) -> None:
        """A look found work, or a fetch started: the crawl is not over for this worker."""
        if self._over:
            self._over = False
            if self._gate is not None:
                self._gate.busy()

    def may_leave(self) -> bool:
        """The crawl is over for this worker and for every sibling (or it has none)."""
        return self._over and (self._gate is None or self._gate.is_open())


class SiblingEndGate:
    """A child's :class:`EndGate`: ``say(True)`` tells the parent the crawl is over for
    it, ``say(False)`` takes that back; the parent sets ``opened``."""

    def __init__(self, opened: Flag, say: Callable[[bool], None]) -> None:
        self._opened = opened
        self._say = say

    def over(self) -> None:
        self._say(True)

    def busy(self) -> None:
        self._say(False)

    def is_open(self) -> bool:
        return self._opened.is_set()


class EndKeeper:
    """The parent's side: opens ``opened`` once every child named in ``names`` has said
    the crawl is over (its last word) or has ended."""

    def __init__(self, names: Iterable[str], opened: Flag) -> None:
        self._names = set(names)
        self._over: set[str] = set()
        self._gone: set[str] = set()
        self._opened = opened

    @property
    def waiting(self) -> list[str]:
        """The children still crawling (sorted): neither said the crawl is over nor
        ended."""
        return sorted(self._names - self._over - self._gone)

    def said(self, name: str, over: bool) -> None:
        """``name``'s word: the crawl is over for it (``over``), or it has work again."""
        if over:
            self._over.add(name)
        else:
            self._over.discard(name)
        self._open_when_none_waiting()

    def ended(self, alive: Mapping[str, bool]) -> None:
        """Look at which children still run: one that ended is no longer waited for."""
        self._gone |= {name for name in self._names if not alive.get(name, False)}
        self._open_when_none_waiting()

    def _open_when_none_waiting(self) -> None:
        if not self.waiting and not self._opened.is_set():
            self._opened.set()
