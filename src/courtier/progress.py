"""Progress output: a live line on a terminal, plain log lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # the CLI imports this module; the worker loads only for a crawl
    from courtier.worker import CrawlStatus


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def status_line(s: CrawlStatus) -> str:
    return (
        f"{s.pages_per_second:6.1f} pages/s | fetched {s.fetched} | queued {s.queued} | "
        f"in flight {s.in_flight} | hosts active {s.hosts_active} | errors {s.errors} | "
        f"denied {s.denied} | {human_bytes(s.bytes)}"
    )


def summary_line(s: CrawlStatus) -> str:
    elapsed = max(0.0, s.now - s.started_at)
    return (
        f"courtier: {s.stop_reason or 'finished'} after {elapsed:.1f} s: fetched {s.fetched} "
        f"({s.pages_per_second:.1f}/s), errors {s.errors}, robots-denied {s.denied}, "
        f"discovered {s.discovered} new URLs, {human_bytes(s.bytes)}"
        + ("; some retries are due later: run again on the same --data to finish them"
           if s.left_for_later else "")
    )


class Progress:
    """Callable handed to the worker; rate-limited so it costs nothing on the hot path.

    mode: "bar" (rewrite one terminal line), "log" (a line every ``log_every``
    seconds), "none", or "auto" (bar on a TTY, log otherwise).
    """

    def __init__(self, mode: str = "auto", stream: TextIO | None = None,
                 log_every: float = 5.0) -> None:
        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "bar" if self.stream.isatty() else "log"
        self.mode = mode
        self.interval = 0.25 if mode == "bar" else log_every
        self._last = 0.0
        self._drawn = False

    def __call__(self, status: CrawlStatus) -> None:
        if self.mode == "none":
            return
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        line = status_line(status)
        if self.mode == "bar":
            self.stream.write("\r\x1b[2K" + line)
            self._drawn = True
        else:
            self.stream.write(time.strftime("%H:%M:%S ") + line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
