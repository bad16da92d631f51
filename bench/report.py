"""Figures of one benchmark run and their presentation (table, ratio line).

:class:`RunResult` holds what was measured from outside a crawler's process
(wall time, CPU user+sys and peak RSS from ``os.wait4``) and what nginx's
access log says about it (coverage, politeness). :func:`run_measured` is the
measuring runner; :func:`table` and :func:`ratio_line` print the comparison.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from dataclasses import dataclass
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


def run_measured(
    cmd: list[str], cwd: Path, log_path: Path, timeout: float
) -> tuple[int, bool, float, resource.struct_rusage]:
    """Run ``cmd`` to its end (or kill it after ``timeout`` s); return exit code, timed-out
    flag, wall seconds and the rusage of the process and the descendants it waited for."""
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
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            break
        now = time.monotonic()
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


def cpu_ratio(results: list[RunResult]) -> float | None:
    """courtier CPU/page ÷ Scrapy CPU/page when both ran and fetched pages."""
    by = {r.name: r for r in results}
    c, s = by.get("courtier"), by.get("scrapy")
    if not c or not s or not c.cpu_per_1k or not s.cpu_per_1k:
        return None
    return c.cpu_per_1k / s.cpu_per_1k


def ratio_line(results: list[RunResult]) -> str | None:
    """``courtier CPU/page ÷ Scrapy CPU/page = X`` when both ran and fetched pages."""
    x = cpu_ratio(results)
    if x is None:
        return None
    verdict = "meets" if x <= TARGET_RATIO else "misses"
    return (f"courtier CPU/page ÷ Scrapy CPU/page = {x:.3f} "
            f"({verdict} the target ≤ {TARGET_RATIO:.2f})")
