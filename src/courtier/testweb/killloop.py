"""Repeated ``kill -9`` of a real crawl process, each followed by a resume.

Used by the test suite (a few kills) and by ``bench/kill_loop.py`` (twenty).
After the last, uninterrupted run the report says whether every reachable
allowed URL was fetched, whether the outbox holds exactly one event per
(url_key, version) and one final event per URL, and whether every WARC file
passes the digest and structural checks.
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from courtier.archive.recovery import check_warc
from courtier.store.open import make_store
from courtier.testweb.server import TestWebServer, politeness_violations
from courtier.testweb.spec import default_web


@dataclass(slots=True)
class KillLoopReport:
    kills: int = 0
    runs: int = 0
    expected: int = 0
    fetched: int = 0
    missing: list[str] = field(default_factory=list)
    duplicate_events: int = 0
    urls_without_event: list[str] = field(default_factory=list)
    warc_problems: list[str] = field(default_factory=list)
    warc_files: int = 0
    refetched: int = 0
    violations_after_restarts: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicate_events or self.urls_without_event
                    or self.warc_problems or self.violations_after_restarts)


async def run_crawler(args: list[str], server: TestWebServer, kill_after: int | None,
                      limit: float) -> int:
    """Run ``python -m courtier ARGS``; SIGKILL it once the server has seen ``kill_after``
    more requests (None: let it finish). Returns the exit status (-9 when killed)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "courtier", *args,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    start = len(server.log)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    try:
        while proc.returncode is None and loop.time() < deadline:
            if kill_after is not None and len(server.log) - start >= kill_after:
                os.kill(proc.pid, signal.SIGKILL)
                break
            await asyncio.sleep(0.01)
        return await asyncio.wait_for(proc.wait(), max(1.0, deadline - loop.time()))
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def kill_loop(data: Path, kills: int, seed: int = 7, hosts: int = 6, pages: int = 12,
                    delay: float = 0.05, store_url: str | None = None) -> KillLoopReport:
    """Crawl the local test web, killing the crawler ``kills`` times at random moments.

    ``store_url``: the crawl's ``--store`` (None: SQLite under ``data``)."""
    rng = random.Random(seed)
    report = KillLoopReport()
    spec = default_web(n_hosts=hosts, pages_per_host=pages, crawl_delay=0.1)
    async with TestWebServer(spec) as server:
        resolve = data.parent / f"{data.name}-hosts.txt"
        resolve.write_text(server.web.hosts_file_text())
        args = ["crawl", "--data", str(data), *server.web.seeds(), "--resolve", str(resolve),
                "--allow-network", "127.0.0.0/8", "--delay", str(delay), "--progress", "none",
                "--linger", "0", *(["--store", store_url] if store_url else [])]
        expected = server.web.expected_fetches()
        for _ in range(kills):
            # a kill somewhere between start-up and well into the crawl
            rc = await run_crawler(args, server, kill_after=rng.randint(1, 40), limit=60.0)
            report.runs += 1
            report.kills += rc == -signal.SIGKILL
        restarted_at = len(server.log)
        rc = await run_crawler(args, server, kill_after=None, limit=120.0)
        report.runs += 1
        log = list(server.log)
    gets = [r for r in log if not r.path_qs.startswith("/robots")]
    counts = collections.Counter(server.url(r.host, r.path_qs) for r in gets)
    report.expected = len(expected)
    report.fetched = len(set(counts) & expected)
    report.missing = sorted(expected - set(counts))
    report.refetched = sum(1 for n in counts.values() if n > 1)
    report.violations_after_restarts = politeness_violations(
        log[restarted_at:], delay=delay, max_in_flight=1)
    store = make_store(store_url, data)
    await store.open()
    try:
        events = await store.read_events(0, 1_000_000)
    finally:
        await store.close()
    keys = [(e.url_key, e.version) for e in events]
    report.duplicate_events = len(keys) - len(set(keys))
    finals = collections.Counter(e.payload["url"] for e in events)
    report.urls_without_event = sorted(u for u in expected if finals[u] == 0)
    for path in sorted((data / "warc").rglob("*.warc.gz")):
        report.warc_files += 1
        check = check_warc(str(path))
        report.warc_problems += [f"{path.name}: {p}" for p in check.problems]
    return report
