"""The crawl's live figures (:class:`CrawlStatus`): written by the worker's parts, read by
the progress display, the admin API and the final summary."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(slots=True)
class CrawlStatus:
    """Live figures for the progress display and the final summary."""

    started_at: float = 0.0
    now: float = 0.0
    pages: int = 0
    fetched: int = 0
    errors: int = 0
    denied: int = 0
    bytes: int = 0
    queued: int = 0
    in_flight: int = 0
    hosts_active: int = 0
    discovered: int = 0
    stale_commits: int = 0
    left_for_later: bool = False   # unfinished retries remain beyond --linger
    longest_stall: float = 0.0     # seconds: the event loop's longest lag (loopwatch.py)
    waiting: str = ""              # what a lingering one-shot crawl waits for (progress.py)
    #: seconds a one-shot crawl slept waiting for retries within --linger, and what it
    #: waited for the last time (progress_text.waited_for_text; "" when only URLs
    #: retrying after their own failures): the final line says so
    waited: float = 0.0
    waited_for: str = ""
    #: URLs of an unfinished cycle left in the store when it ended (recrawls not counted)
    left_unfetched: int | None = None   # never fetched
    left_retrying: int | None = None    # retrying after a failure
    stop_reason: str = ""
    warc_files: list[str] = field(default_factory=list)

    @property
    def pages_per_second(self) -> float:
        elapsed = self.now - self.started_at
        return self.fetched / elapsed if elapsed > 0 else 0.0


#: the signals that stop a crawl, and the stop reason each gives (the summary's first
#: word): Ctrl-C interrupts, a service manager's SIGTERM stops
STOP_REASONS: dict[int, str] = {signal.SIGINT: "interrupted", signal.SIGTERM: "stopped"}

#: figures that add up across the workers of one crawl (their shards are disjoint)
SUMMED_FIGURES = ("pages", "fetched", "errors", "denied", "bytes", "queued", "in_flight",
                  "hosts_active", "discovered", "stale_commits")


def summed_status(statuses: Sequence[CrawlStatus]) -> CrawlStatus:
    """The crawl-wide figures of several workers' statuses: counts added up, the earliest
    start and the latest time, the longest stall and wait, each worker's waiting text, the left
    counts added when every worker knows its own, the WARC files of all. The stop reason
    is left to the caller (it depends on how the workers ended)."""
    total = CrawlStatus()
    if not statuses:
        return total
    total.started_at = min(s.started_at for s in statuses)
    total.now = max(s.now for s in statuses)
    for name in SUMMED_FIGURES:
        setattr(total, name, sum(getattr(s, name) for s in statuses))
    total.longest_stall = max(s.longest_stall for s in statuses)
    longest_wait = max(statuses, key=lambda s: s.waited)
    total.waited, total.waited_for = longest_wait.waited, longest_wait.waited_for
    total.left_for_later = any(s.left_for_later for s in statuses)
    waiting = [s.waiting.removeprefix("waiting: ") for s in statuses if s.waiting]
    total.waiting = "waiting: " + "; ".join(waiting) if waiting else ""
    unfetched = [s.left_unfetched for s in statuses if s.left_for_later]
    retrying = [s.left_retrying for s in statuses if s.left_for_later]
    if all(n is not None for n in unfetched + retrying):
        total.left_unfetched = sum(n for n in unfetched if n is not None)
        total.left_retrying = sum(n for n in retrying if n is not None)
    total.warc_files = sorted(f for s in statuses for f in s.warc_files)
    return total
