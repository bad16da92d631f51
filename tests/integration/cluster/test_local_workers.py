"""``courtier crawl --workers 2 --store postgresql://…`` from the command line: two worker
processes on one machine crawl the test web together.

Judged by the test web's own request log (every expected page fetched exactly once, no
politeness violation: the rule of tests/integration/cluster, ``politeness_violations``
with each Crawl-delay host's delay) and by each child's WARC files (``DATA/worker-0`` and
``DATA/worker-1``: both processes fetched).

Seen red on a scratch copy: with ``child_configs`` giving every child the same worker id
(both held every lease under one identity: 107 politeness violations, "2 requests in
flight"), and with ``run_local_cluster`` starting only the first child (the second WARC
folder empty).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from courtier.testweb.server import TestWebServer, politeness_violations
from courtier.testweb.spec import default_web

pytestmark = pytest.mark.timeout(300)

DELAY = 0.15


def warc_responses(folder: Path) -> set[str]:
    """Target URIs of the response/revisit records of the WARC files under ``folder``."""
    uris = set()
    for path in sorted(folder.rglob("*.warc.gz")):
        with path.open("rb") as handle:
            for record in ArchiveIterator(handle):
                if record.rec_type in ("response", "revisit"):
                    uris.add(record.rec_headers.get_header("WARC-Target-URI"))
    return uris


async def test_crawl_with_two_workers_fetches_every_page_once_politely(
        pg_dsn: str, tmp_path: Path) -> None:
    spec = default_web(n_hosts=12, pages_per_host=8, crawl_delay=0.3, latency=0.02)
    async with TestWebServer(spec) as server:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text(server.web.hosts_file_text())
        data = tmp_path / "data"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "courtier", "crawl", "--workers", "2", "--store", pg_dsn,
            "--data", str(data), "--resolve", str(hosts), "--allow-network", "127.0.0.0/8",
            "--delay", str(DELAY), "--lease-ttl", "3", "--concurrency", "8",
            "--progress", "none", "--linger", "0", *server.web.seeds(),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            out, err = await proc.communicate()
        finally:  # a failed or timed-out test leaves no crawler behind: two SIGTERMs
            # (the parent forwards them: drain, then abort), SIGKILL as a last resort
            for _ in range(2):
                if proc.returncode is None:
                    proc.terminate()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(proc.wait(), 30)
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        expected = server.web.expected_fetches()
        archived = server.web.expected_archived()  # all but the PDFs and PNGs
        log = list(server.log)
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]

    pages = [r for r in log if not r.path_qs.startswith("/robots")]
    counts = collections.Counter(server.url(r.host, r.path_qs) for r in pages)
    assert expected - set(counts) == set(), "expected pages not fetched"
    assert {u: n for u, n in counts.items() if n > 1} == {}, "a page was fetched twice"
    host_delays = {h.name: max(DELAY, h.crawl_delay) for h in spec.of_kind("crawl_delay")}
    assert politeness_violations(log, delay=DELAY, max_in_flight=1,
                                 host_delays=host_delays) == []

    by_child = {name: warc_responses(data / name / "warc") for name in ("worker-0", "worker-1")}
    assert all(by_child.values()), {k: len(v) for k, v in by_child.items()}
    assert not by_child["worker-0"] & by_child["worker-1"], "both children archived a URL"
    assert archived <= by_child["worker-0"] | by_child["worker-1"]
    assert not (expected - archived) & (by_child["worker-0"] | by_child["worker-1"])
    assert "fetched" in out.decode()  # the summed summary line
