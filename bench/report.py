"""Figures of one benchmark run and their presentation (table, ratio line).

:class:`RunResult` holds what was measured from outside a crawler's process
(wall time, CPU user+sys and peak RSS from ``os.wait4``) and what nginx's
access log says about it (coverage, politeness). :func:`run_measured` is the
measuring runner; :func:`table` and :func:`ratio_line` print the comparison.
"""

from __future__ import annotations

import itertools
import os
import resource
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RunResult:
    """One crawler run, measured from outside and judged from nginx's log."""

    name: str
    exit_code: int
    timed_out: bool
    wall_s: float
    cpu_user_s: float
    cpu_sys_s: float
    max_rss_mb: float
    pages: int
    existing: int
    coverage: float
    refetches: int
    robots_requests: int
    other_requests: int
    active_s: float
    violations: int
    concurrency_violations: int
    gap_violations: int
    robots_order_violations: int
    disallowed_fetches: int
    min_gap_s: float | None
    examples: list[str]
    load_before: float = 0.0
    load_after: float = 0.0
    delay: float = 0.0
    page_requests: int = 0
    window_cpu_s: float | None = None
    #: connections per host from nginx's log (over HTTPS: TLS handshakes), as
    #: ``access_log.TrafficReport.handshakes_line`` gives them
    connections_per_host: str = ""
    connections: int = 0
    #: requests for non-HTML files, the body bytes nginx sent for them, what those
    #: bodies hold in full, and [requests, bytes sent] by category (``check_traffic``)
    non_html_requests: int = 0
    non_html_bytes: int = 0
    non_html_full_bytes: int = 0
    non_html_by_category: dict[str, list[int]] = field(default_factory=dict)

    @property
    def window_cpu_per_1k(self) -> float | None:
        """CPU seconds per 1,000 pages inside the crawl window (None when not sampled)."""
        if self.window_cpu_s is None or not self.pages:
            return None
        return self.window_cpu_s * 1000 / self.pages

    @property
    def duplicate_rate(self) -> float:
        """Refetched pages ÷ page responses, from the server's log (0.0 when none)."""
        return self.refetches / self.page_requests if self.page_requests else 0.0

    @property
    def window_pages_per_s(self) -> float:
        """Distinct pages per second of the crawl window (first request to last response)."""
        return self.pages / self.active_s if self.active_s > 0 else 0.0

    @property
    def cpu_s(self) -> float:
        """user + sys CPU seconds of the crawler's process tree."""
        return self.cpu_user_s + self.cpu_sys_s

    @property
    def cpu_per_1k(self) -> float | None:
        """CPU seconds per 1,000 distinct pages fetched (None when nothing was fetched)."""
        return self.cpu_s * 1000 / self.pages if self.pages else None

    @property
    def pages_per_s(self) -> float:
        """Distinct pages per wall-clock second, process start to exit."""
        return self.pages / self.wall_s if self.wall_s > 0 else 0.0


_TICK = os.sysconf("SC_CLK_TCK")


def group_cpu_s(pgid: int) -> float:
    """CPU seconds (user + sys, waited-for children included) of the live processes of
    process group ``pgid``, from /proc; processes that exit while it reads are skipped."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                fields = fh.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if len(fields) > 14 and int(fields[2]) == pgid:  # fields[0] is the state
            total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return total / _TICK


def cpu_between(samples: list[tuple[float, float]], start: float, end: float) -> float | None:
    """CPU seconds spent between wall times ``start`` and ``end``, interpolated linearly
    in ``samples`` ((epoch seconds, cumulative CPU seconds), time-ordered); None when
    the samples do not cover both ends."""
    def at(t: float) -> float | None:
        for (t0, c0), (t1, c1) in itertools.pairwise(samples):
            if t0 <= t <= t1:
                return c0 if t1 == t0 else c0 + (c1 - c0) * (t - t0) / (t1 - t0)
        return None

    a, b = at(start), at(end)
    return None if a is None or b is None else b - a


def run_measured(
    cmd: list[str], cwd: Path, log_path: Path, timeout: float,
    samples: list[tuple[float, float]] | None = None, sample_every: float = 0.25,
) -> tuple[int, bool, float, resource.struct_rusage]:
    """Run ``cmd`` to its end (or kill it after ``timeout`` s); return exit code, timed-out
    flag, wall seconds and the rusage of the process and the descendants it waited for.

    With ``samples``, appends (epoch seconds, CPU seconds of the process group so far)
    every ``sample_every`` s while it runs (:func:`group_cpu_s`), and the final rusage
    figure at its exit, so :func:`cpu_between` can give the CPU of any wall window."""
    start = time.monotonic()
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    timed_out = False
    term_sent_at: float | None = None
    next_sample = start
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            if samples is not None:
                samples.append((time.time(), usage.ru_utime + usage.ru_stime))
            break
        now = time.monotonic()
        if samples is not None and now >= next_sample:
            samples.append((time.time(), group_cpu_s(proc.pid)))
            next_sample = now + sample_every
        if now - start > timeout and term_sent_at is None:
            timed_out = True
            term_sent_at = now
            os.killpg(proc.pid, signal.SIGTERM)
        elif term_sent_at is not None and now - term_sent_at > 10:
            os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.02)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, timed_out, wall, usage


def _fmt(v: float | None, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def table(results: list[RunResult]) -> str:
    """The side-by-side table as plain text."""
    rows = [
        (
            "crawler",
            "pages",
            "coverage",
            "wall s",
            "pages/s",
            "window p/s",
            "CPU s",
            "CPU s/1k pages",
            "window CPU s/1k",
            "peak RSS MB",
            "violations c/g/r/d",
            "min gap s",
            "dup fetches",
            "load1",
            "exit",
        )
    ]
    for r in results:
        rows.append(
            (
                r.name,
                str(r.pages),
                f"{r.coverage:.1%}",
                f"{r.wall_s:.1f}",
                f"{r.pages_per_s:.1f}",
                f"{r.window_pages_per_s:.1f}",
                f"{r.cpu_s:.2f}",
                _fmt(r.cpu_per_1k, ".2f"),
                _fmt(r.window_cpu_per_1k, ".2f"),
                f"{r.max_rss_mb:.0f}",
                f"{r.violations} ({r.concurrency_violations}/{r.gap_violations}/"
                f"{r.robots_order_violations}/{r.disallowed_fetches})",
                _fmt(r.min_gap_s, ".3f"),
                f"{r.refetches} ({r.duplicate_rate:.2%})",
                f"{r.load_before:.1f}/{r.load_after:.1f}",
                str(r.exit_code) + ("!" if r.timed_out else ""),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


TARGET_RATIO = 0.20


def cpu_ratio(results: list[RunResult], window: bool = False) -> float | None:
    """courtier CPU/page ÷ Scrapy CPU/page when both ran and fetched pages (``window``:
    CPU inside the crawl window only)."""
    by = {r.name: r for r in results}
    c, s = by.get("courtier"), by.get("scrapy")
    if not c or not s:
        return None
    cx, sx = (c.window_cpu_per_1k, s.window_cpu_per_1k) if window else (c.cpu_per_1k,
                                                                         s.cpu_per_1k)
    return cx / sx if cx and sx else None


def ratio_line(results: list[RunResult], target: float = TARGET_RATIO) -> str | None:
    """``courtier CPU/page ÷ Scrapy CPU/page = X`` when both ran and fetched pages, and
    the same ratio inside the crawl window when both were sampled."""
    x = cpu_ratio(results)
    if x is None:
        return None
    verdict = "meets" if x <= target else "misses"
    w = cpu_ratio(results, window=True)
    inside = "" if w is None else f"; crawl window only: {w:.3f}"
    return (f"courtier CPU/page ÷ Scrapy CPU/page = {x:.3f} "
            f"({verdict} the target ≤ {target:.2f}){inside}")
