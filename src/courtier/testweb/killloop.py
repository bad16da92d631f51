"""Repeated ``kill -9`` of a real crawl process, each followed by a resume.

Used by the test suite (a few kills) and by ``bench/kill_loop.py`` (twenty).
After the last, uninterrupted run the report says whether every reachable
allowed URL was fetched, whether the outbox holds exactly one event per
(url_key, version) and exactly one final event per URL, whether the last run
exited 0, whether every WARC file passes the digest and structural checks,
and whether the server's log shows any politeness violation — each host
against its own delay (its ``Crawl-delay`` where it has one, else
``--delay``), across the whole log, so the gap between the last request of a
killed run and the first of the next one counts too.

A *final* event is one whose outcome ends the URL's fetch cycle
(:data:`courtier.core.outcome.FINAL_OUTCOMES`: ok, not_modified, redirect, gone,
http_error, robots_denied, blocked, error — not retry). The crawl is one-shot
and its recrawl interval (24 h) far longer than the loop, so every URL has one
cycle: every expected URL must have exactly one final event, no URL more than
one, and no event of a URL may follow its final one.
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import signal
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from courtier.archive.recovery import check_warc
from courtier.core.outcome import FINAL_OUTCOMES
from courtier.store.base import Event
from courtier.store.open import make_store
from courtier.testweb.server import RequestRecord, TestWebServer, politeness_violations
from courtier.testweb.spec import default_web


@dataclass(slots=True)
class KillLoopReport:
    kills: int = 0
    runs: int = 0
    expected: int = 0
    fetched: int = 0
    missing: list[str] = field(default_factory=list)
    duplicate_events: int = 0
    urls_without_event: list[str] = field(default_factory=list)  # no final event
    urls_with_several_finals: list[str] = field(default_factory=list)
    events_after_final: list[str] = field(default_factory=list)
    final_exit: int | None = None
    warc_problems: list[str] = field(default_factory=list)
    warc_files: int = 0
    refetched: int = 0
    violations_after_restarts: list[str] = field(default_factory=list)
    restart_gaps: list[tuple[str, float, float]] = field(default_factory=list)
    # (host, gap between the last request before a restart and the first after, delay)

    @property
    def ok(self) -> bool:
        short_gaps = [g for g in self.restart_gaps if g[1] < g[2]]
        return self.final_exit == 0 and not (
            self.missing or self.duplicate_events or self.urls_without_event
            or self.urls_with_several_finals or self.events_after_final
            or self.warc_problems or self.violations_after_restarts or short_gaps)


class CrawlerStalled(AssertionError):
    """A crawler run neither reached its kill point nor ended within its time limit."""


async def run_crawler(args: list[str], server: TestWebServer, kill_after: int | None,
                      limit: float, log_path: Path | None = None) -> int:
    """Run ``python -m courtier ARGS``; SIGKILL it once the server has seen ``kill_after``
    more requests (None: let it finish). Returns the exit status (-9 when killed).
    ``log_path``: where the run's stderr goes (None: discarded)."""
    err = os.open(log_path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "courtier", *args,
            stdout=asyncio.subprocess.DEVNULL, stderr=err)
    finally:
        os.close(err)
    start = len(server.log)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    try:
        while proc.returncode is None and loop.time() < deadline:
            if kill_after is not None and len(server.log) - start >= kill_after:
                os.kill(proc.pid, signal.SIGKILL)
                break
            await asyncio.sleep(0.01)
        try:
            return await asyncio.wait_for(proc.wait(), max(1.0, deadline - loop.time()))
        except TimeoutError:
            seen = len(server.log) - start
            raise CrawlerStalled(
                f"crawler run did not end within {limit:.0f} s ({seen} requests seen, kill "
                f"after {kill_after}); its stderr: {log_path or 'discarded'}") from None
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def final_event_problems(events: Sequence[Event], expected: Iterable[str]
                         ) -> tuple[list[str], list[str], list[str]]:
    """(expected URLs without a final event, URLs with several, events after a final one).

    A final event has an outcome in :data:`FINAL_OUTCOMES` (see the module docstring)."""
    finals = collections.Counter(e.payload["url"] for e in events
                                 if e.payload["outcome"] in FINAL_OUTCOMES)
    without = sorted(u for u in expected if finals[u] == 0)
    several = sorted(u for u, n in finals.items() if n > 1)
    after: list[str] = []
    final_seen: set[str] = set()
    for event in sorted(events, key=lambda e: e.id):
        url = event.payload["url"]
        if url in final_seen:
            after.append(f"{url} v{event.version} {event.payload['outcome']}")
        if event.payload["outcome"] in FINAL_OUTCOMES:
            final_seen.add(url)
    return without, several, after


def restart_gaps(log: list[RequestRecord], restarts: list[int],
                 host_delays: dict[str, float], delay: float) -> list[tuple[str, float, float]]:
    """(host, gap, delay in force) across each restart: from the host's last request start
    before log index ``i`` to its first one after, for every ``i`` in ``restarts``."""
    gaps = []
    for index in restarts:
        before, after = log[:index], log[index:]
        for host in sorted({r.host for r in after} & {r.host for r in before}):
            last = max(r.start for r in before if r.host == host)
            first = min(r.start for r in after if r.host == host)
            gaps.append((host, first - last, host_delays.get(host, delay)))
    return gaps


async def kill_loop(data: Path, kills: int, seed: int = 7, hosts: int = 6, pages: int = 12,
                    delay: float = 0.05, store_url: str | None = None,
                    crawl_delay: float = 0.25) -> KillLoopReport:
    """Crawl the local test web, killing the crawler ``kills`` times at random moments.

    ``store_url``: the crawl's ``--store`` (None: SQLite under ``data``).
    ``crawl_delay`` (longer than ``delay`` on purpose) is what the test web's
    Crawl-delay hosts ask for."""
    rng = random.Random(seed)
    report = KillLoopReport()
    spec = default_web(n_hosts=hosts, pages_per_host=pages, crawl_delay=crawl_delay)
    async with TestWebServer(spec) as server:
        resolve = data.parent / f"{data.name}-hosts.txt"
        resolve.write_text(server.web.hosts_file_text())
        args = ["crawl", "--data", str(data), *server.web.seeds(), "--resolve", str(resolve),
                "--allow-network", "127.0.0.0/8", "--delay", str(delay), "--progress", "log",
                "--linger", "0", *(["--store", store_url] if store_url else [])]
        expected = server.web.expected_fetches()
        restarts: list[int] = []
        for n in range(kills):
            if n:
                restarts.append(len(server.log))
            # a kill somewhere between start-up and well into the crawl
            rc = await run_crawler(args, server, kill_after=rng.randint(1, 40), limit=60.0,
                                   log_path=data.parent / f"run-{n}.log")
            report.runs += 1
            report.kills += rc == -signal.SIGKILL
        if kills:
            restarts.append(len(server.log))
        report.final_exit = await run_crawler(args, server, kill_after=None, limit=120.0,
                                              log_path=data.parent / f"run-{kills}.log")
        report.runs += 1
        log = list(server.log)
    host_delays = {h.name: max(delay, h.crawl_delay) for h in spec.of_kind("crawl_delay")}
    gets = [r for r in log if not r.path_qs.startswith("/robots")]
    counts = collections.Counter(server.url(r.host, r.path_qs) for r in gets)
    report.expected = len(expected)
    report.fetched = len(set(counts) & expected)
    report.missing = sorted(expected - set(counts))
    report.refetched = sum(1 for n in counts.values() if n > 1)
    # the whole log: every run, and the gaps across restarts, each host at its own delay
    report.violations_after_restarts = politeness_violations(
        log, delay=delay, max_in_flight=1, host_delays=host_delays)
    report.restart_gaps = restart_gaps(log, restarts, host_delays, delay)
    store = make_store(store_url, data)
    await store.open()
    try:
        events = await store.read_events(0, 1_000_000)
    finally:
        await store.close()
    keys = [(e.url_key, e.version) for e in events]
    report.duplicate_events = len(keys) - len(set(keys))
    (report.urls_without_event, report.urls_with_several_finals,
     report.events_after_final) = final_event_problems(events, expected)
    for path in sorted((data / "warc").rglob("*.warc.gz")):
        report.warc_files += 1
        check = check_warc(str(path))
        report.warc_problems += [f"{path.name}: {p}" for p in check.problems]
    return report
