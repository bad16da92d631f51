"""The crawl's live figures (:class:`CrawlStatus`): written by the worker's parts, read by
the progress display, the admin API and the final summary."""

from __future__ import annotations

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
    #: URLs of an unfinished cycle left in the store when it ended (recrawls not counted)
    left_unfetched: int | None = None   # never fetched
    left_retrying: int | None = None    # retrying after a failure
    stop_reason: str = ""
    warc_files: list[str] = field(default_factory=list)

    @property
    def pages_per_second(self) -> float:
        elapsed = self.now - self.started_at
        return self.fetched / elapsed if elapsed > 0 else 0.0
