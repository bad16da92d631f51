"""What ``courtier crawl --workers N`` shows while its worker processes crawl.

Each child sends its live figures to the parent (:class:`ChildReporter`, at most once a
second, through the queue the parent reads); the parent keeps the latest of each
(:class:`ClusterProgress`) and shows, like a one-process crawl's ``--progress``: on a
terminal (``bar``) one line of crawl-wide figures, rewritten; otherwise (``log``) every
few seconds a crawl-wide line and one line per worker, each saying which it is.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, TextIO

from courtier.crawl.progress import ProgressOutput, status_line
from courtier.crawl.progress_text import RecentRate
from courtier.crawl.status import CrawlStatus, summed_status

#: seconds between two reports of one child to the parent
REPORT_EVERY = 1.0

#: the messages a child sends its parent: (kind, worker name, figures as a dict), where
#: kind is READY (its signal handlers are in place; no figures), REGISTERED (its first
#: heartbeat is in the store: cluster/start_gate.py; no figures), PROGRESS (its live
#: figures), OVER or BUSY (its look found the crawl over, or it has work again:
#: cluster/end_gate.py; no figures) or FINAL (its crawl's end)
READY, REGISTERED, PROGRESS, FINAL = "ready", "registered", "progress", "final"
OVER, BUSY = "over", "busy"


class ChildReporter:
    """The ``progress`` callable of a child's crawl: sends ``(PROGRESS, name, figures)``
    through ``send`` at most every :data:`REPORT_EVERY` seconds."""

    def __init__(self, name: str, send: Callable[[tuple[str, str, dict[str, Any]]], None],
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self._send = send
        self._monotonic = monotonic
        self._last = float("-inf")

    def __call__(self, status: CrawlStatus) -> None:
        now = self._monotonic()
        if now - self._last < REPORT_EVERY:
            return
        self._last = now
        self._send((PROGRESS, self.name, dataclasses.asdict(status)))


def cluster_lines(statuses: dict[str, CrawlStatus], rates: dict[str, float],
                  total_rate: float, workers: int) -> list[str]:
    """The crawl-wide line (the figures of the ``workers`` that have reported, summed),
    then one line per worker (in name order)."""
    total = summed_status(list(statuses.values()))
    who = f"{workers} workers" if len(statuses) == workers else \
        f"{len(statuses)} of {workers} workers reporting"
    lines = [f"crawl-wide ({who}): {status_line(total, total_rate)}"]
    lines += [f"  {name}: {status_line(statuses[name], rates.get(name))}"
              for name in sorted(statuses)]
    return lines


class ClusterProgress:
    """The parent's display of its ``workers`` children's figures (see the module
    docstring).

    ``mode``: ``bar``, ``log``, ``none`` or ``auto`` (bar on a terminal, log otherwise);
    :meth:`update` records a child's figures, :meth:`show` writes when one is due."""

    def __init__(self, workers: int, mode: str = "auto", stream: TextIO | None = None,
                 log_every: float = 5.0, monotonic: Callable[[], float] = time.monotonic
                 ) -> None:
        self.workers = workers
        self.output = ProgressOutput(mode, stream)
        self.mode = self.output.mode
        self.interval = 0.5 if self.mode == "bar" else log_every
        self._monotonic = monotonic
        self._last = monotonic()  # the first lines once the workers have had a moment
        self._statuses: dict[str, CrawlStatus] = {}
        self._rates: dict[str, RecentRate] = {}
        self._rate_now: dict[str, float] = {}
        self._total_rate = RecentRate()

    def update(self, name: str, figures: dict[str, Any]) -> None:
        self._statuses[name] = status = CrawlStatus(**figures)
        self._rate_now[name] = self._rates.setdefault(name, RecentRate()).update(
            status.now, status.fetched)

    def show(self) -> None:
        """Write the lines if some figures arrived and the interval has passed."""
        now = self._monotonic()
        if self.mode == "none" or not self._statuses or now - self._last < self.interval:
            return
        self._last = now
        total = summed_status(list(self._statuses.values()))
        total_rate = self._total_rate.update(total.now, total.fetched)
        self.output.show(cluster_lines(self._statuses, self._rate_now, total_rate,
                                       self.workers))

    def close(self) -> None:
        self.output.close()
