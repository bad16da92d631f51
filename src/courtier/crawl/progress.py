"""Progress output: a live line on a terminal, plain log lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO, cast

from courtier.crawl.progress_text import RATE_WINDOW, RecentRate

if TYPE_CHECKING:  # the CLI imports this module; the worker loads only for a crawl
    from courtier.core.config import CrawlConfig
    from courtier.crawl.status import CrawlStatus


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def status_line(s: CrawlStatus, recent_rate: float | None = None) -> str:
    """One progress line; ``recent_rate`` is pages/s over the last 10 s (progress_text.py),
    the average since the start when not given."""
    rate = s.pages_per_second if recent_rate is None else recent_rate
    return (
        f"{rate:6.1f} pages/s (last {RATE_WINDOW:.0f} s) | fetched {s.fetched} | "
        f"queued {s.queued} | in flight {s.in_flight} | hosts active {s.hosts_active} | "
        f"errors {s.errors} | denied {s.denied} | {human_bytes(s.bytes)}"
        + (f" | {s.waiting}" if s.waiting else "")
    )


def summary_line(s: CrawlStatus) -> str:
    elapsed = max(0.0, s.now - s.started_at)
    return (
        f"courtier: {s.stop_reason or 'finished'} after {elapsed:.1f} s: fetched {s.fetched} "
        f"({s.pages_per_second:.1f}/s), errors {s.errors}, robots-denied {s.denied}, "
        f"discovered {s.discovered} new URLs, {human_bytes(s.bytes)}"
        + _waited(s)
        + (_left_for_later(s) if s.left_for_later else "")
    )


def _waited(s: CrawlStatus) -> str:
    """How long a one-shot crawl slept for retries within ``--linger``, and for what
    (nothing when it did not wait a second)."""
    if s.waited < 1.0:
        return ""
    return f"; waited {s.waited:.0f} s for {s.waited_for or 'retries'}"


def _left_for_later(s: CrawlStatus) -> str:
    """How many URLs of an unfinished cycle stay in the store, and why (the hosts only
    when the wait before did not name them already). URLs waiting only for their next
    recrawl are not left for later: their cycle is done."""
    counts = ""
    if s.left_unfetched is not None and s.left_retrying is not None:
        kinds = [f"{n} {label}" for n, label in ((s.left_unfetched, "never fetched"),
                                                 (s.left_retrying, "retrying")) if n]
        counts = (f"{s.left_unfetched + s.left_retrying} URLs unfinished"
                  f" ({', '.join(kinds)}); ") if kinds else ""
    why = s.waiting.removeprefix("waiting: ")
    if s.waited >= 1.0 and s.waited_for:
        why = why.removeprefix(s.waited_for).removeprefix(", ")
    why = why or "retries due later"
    return (f"; left for later: {counts}{why} (beyond --linger): run again on the same "
            "--data to finish them")


class ProgressOutput:
    """Where progress lines go: ``mode`` "bar" (one terminal line, rewritten), "log"
    (time-stamped lines), "none", or "auto" (bar on a TTY, log otherwise). :meth:`show`
    draws the first line (bar) or writes every line (log); :meth:`close` ends a bar."""

    def __init__(self, mode: str = "auto", stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "bar" if self.stream.isatty() else "log"
        self.mode = mode
        self._drawn = False

    def show(self, lines: list[str]) -> None:
        if self.mode == "none" or not lines:
            return
        if self.mode == "bar":
            self.stream.write("\r\x1b[2K" + lines[0])
            self._drawn = True
        else:
            stamp = time.strftime("%H:%M:%S ")
            self.stream.write("".join(stamp + line + "\n" for line in lines))
        self.stream.flush()

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


class Progress:
    """Callable handed to the worker; rate-limited so it costs nothing on the hot path.

    mode: "bar" (rewrite one terminal line), "log" (a line every ``log_every``
    seconds), "none", or "auto" (bar on a TTY, log otherwise).
    """

    def __init__(self, mode: str = "auto", stream: TextIO | None = None,
                 log_every: float = 5.0) -> None:
        self.output = ProgressOutput(mode, stream)
        self.mode = self.output.mode
        self.interval = 0.25 if self.mode == "bar" else log_every
        self._last = 0.0
        self._rate = RecentRate()

    def __call__(self, status: CrawlStatus) -> None:
        if self.mode == "none":
            return
        now = time.monotonic()
        rate = self._rate.update(status.now, status.fetched)
        if now - self._last < self.interval:
            return
        self._last = now
        self.output.show([status_line(status, rate)])

    def close(self) -> None:
        self.output.close()


def progress_stream(config: CrawlConfig, mode: str | None = None) -> TextIO | None:
    """With ``--log-format json`` progress lines (``log`` mode, or ``auto`` off a terminal)
    are JSON log lines too (``event`` ``progress``); None: stderr as it is. ``mode``:
    ``config.progress`` when not given."""
    mode = config.progress if mode is None else mode
    if config.log_format != "json" or mode not in ("auto", "log") or \
            (mode == "auto" and sys.stderr.isatty()):
        return None
    from courtier.core.logs import JsonLineStream

    return cast(TextIO, JsonLineStream(sys.stderr))
