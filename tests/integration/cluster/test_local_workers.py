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
import json
import os
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from courtier.core.urls import canonicalize
from courtier.testweb.server import TestWebServer, politeness_violations
from courtier.testweb.spec import default_web
from tests.integration.cluster.harness import ids_each_owning

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


async def _start_crawl(dsn: str, data: Path, server: TestWebServer, hosts: Path,
                       *extra: str) -> asyncio.subprocess.Process:
    """The crawl in a process group of its own, as a shell runs a command: a Ctrl-C at
    the terminal is a SIGINT to every process of that group."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "courtier", "crawl", "--workers", "2", "--store", dsn,
        "--data", str(data), "--resolve", str(hosts), "--allow-network", "127.0.0.0/8",
        "--delay", str(DELAY), "--lease-ttl", "3", "--concurrency", "8", "--linger", "0",
        *extra, *server.web.seeds(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)


async def _read_until(proc: asyncio.subprocess.Process, seen: list[str],
                      done: Callable[[list[str]], bool]) -> None:
    """Append stderr lines to ``seen`` until ``done(seen)`` (fails if the crawl ends first)."""
    assert proc.stderr is not None
    while not done(seen):
        line = await asyncio.wait_for(proc.stderr.readline(), 120)
        assert line, f"the crawl ended first: {seen[-20:]}"
        seen.append(line.decode(errors="replace").rstrip("\n"))


async def _finish(proc: asyncio.subprocess.Process, seen: list[str]) -> str:
    """The crawl's stdout once it ends; the rest of stderr appended to ``seen``. A crawl
    that does not end is stopped hard (two SIGTERMs, then SIGKILL)."""
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 240)  # a hang guard
    finally:
        for _ in range(2):
            if proc.returncode is None:
                proc.terminate()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), 30)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    seen += err.decode(errors="replace").splitlines()
    return out.decode()


async def _courtier_json(*argv: str) -> dict[str, Any]:
    """The JSON a ``courtier`` command prints, run as a user runs it in another terminal."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "courtier", *argv,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    answer: dict[str, Any] = json.loads(out)
    return answer


async def _stats(dsn: str) -> dict[str, Any]:
    """``courtier stats --store DSN``."""
    return await _courtier_json("stats", "--store", dsn)


async def _cdxj(data: Path) -> list[dict[str, Any]]:
    """The entries of ``courtier export cdxj --data DATA``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "courtier", "export", "cdxj", "--data", str(data),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return [json.loads(line.split(" ", 2)[2]) for line in out.decode().splitlines()]


#: the web of the tests that stop the crawl once both workers fetch: far more pages than
#: they wait for (a stop drains only the fetches in flight, so the size costs nothing).
#: With 20 pages a host, on a machine whose cores were both busy, the second worker had
#: fetched nothing when the first had crawled the whole web alone (the first worker took
#: every shard and handed half over when the second joined, before the children's start
#: gate of issue #29: test_start_gate.py).
STOPPED_WEB: dict[str, Any] = {"n_hosts": 6, "pages_per_host": 80, "crawl_delay": 0.3,
                               "latency": 0.02}


def _give_owning_ids(data: Path, server: TestWebServer) -> None:
    """Worker ids for the two children (kept in ``DATA/worker-<i>/worker-id``, as a
    child makes them) of which each owns at least two of the web's hosts. A host's shard
    comes from its name and its owner from the worker ids by rendezvous hashing, so with
    the random ids a child makes for itself one of the two owned none of the six hosts
    about one run in thirty (a CI run of 2026-12-06: worker-0 "fetched 0" to the end)."""
    ids = ids_each_owning({c.host: c.shard for c in map(canonicalize, server.web.seeds())},
                          count=2, at_least=2)
    for i, worker_id in enumerate(ids):
        (data / f"worker-{i}").mkdir(parents=True, exist_ok=True)
        (data / f"worker-{i}" / "worker-id").write_text(worker_id + "\n", encoding="utf-8")


def _fetching_lines(seen: list[str]) -> bool:
    """A crawl-wide progress line of both workers, then each worker's line, each with
    pages fetched (both workers are crawling)."""
    if not seen or not any("crawl-wide (2 workers):" in line for line in seen[-3:-2]):
        return False
    return all(re.search(rf"  worker-{i}: .*\| fetched [1-9]", line) is not None
               for i, line in enumerate(seen[-2:]))


async def test_crawl_with_two_workers_fetches_every_page_once_politely(
        pg_dsn: str, tmp_path: Path) -> None:
    spec = default_web(n_hosts=12, pages_per_host=8, crawl_delay=0.3, latency=0.02)
    async with TestWebServer(spec) as server:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text(server.web.hosts_file_text())
        data = tmp_path / "data"
        proc = await _start_crawl(pg_dsn, data, server, hosts,
                                  "--progress", "none")
        seen: list[str] = []
        out = await _finish(proc, seen)  # a failed test leaves no crawler behind
        expected = server.web.expected_fetches()
        archived = server.web.expected_archived()  # all but the PDFs and PNGs
        log = list(server.log)
    assert proc.returncode == 0, "\n".join(seen[-30:])

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
    assert "fetched" in out  # the summed summary line


# ---- what a user sees of `crawl --workers 2` (issue #36) ---------------------------------


async def test_progress_while_it_runs_a_sigterm_stops_it_and_the_warc_folders_are_named(
        pg_dsn: str, tmp_path: Path) -> None:
    """``--progress log``: crawl-wide and per-worker lines while the workers crawl, and
    ``courtier stats --store`` then says the crawl runs (its live workers named, the
    figures labelled crawl-wide or one worker's); a SIGTERM is reported as "stopped" (not
    "interrupted"), its stopping lines at INFO; the last line names each worker's WARC
    folder, and those hold the responses, which ``export cdxj``, ``reparse`` and ``archive
    gc`` find in both folders with ``--data`` alone; afterwards ``stats`` says it does not
    run."""
    spec = default_web(**STOPPED_WEB)
    async with TestWebServer(spec) as server:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text(server.web.hosts_file_text())
        data = tmp_path / "mw"
        _give_owning_ids(data, server)
        proc = await _start_crawl(pg_dsn, data, server, hosts, "--progress", "log")
        seen: list[str] = []
        try:
            await _read_until(proc, seen, _fetching_lines)
            live = await _stats(pg_dsn)
            proc.send_signal(signal.SIGTERM)
        finally:
            out = await _finish(proc, seen)
        log = list(server.log)
        after = await _stats(pg_dsn)
    assert proc.returncode == 0, "\n".join(seen[-30:])
    ids = sorted((data / f"worker-{i}" / "worker-id").read_text().strip() for i in (0, 1))
    assert live["running"] is True and live["live_workers"] == ids, live
    assert "store" in live["figures"]["crawl_wide"]
    assert "status" in live["figures"]["this_worker"] and live["status"] is None
    assert after["running"] is False and after["live_workers"] == [], after
    summary, where = out.splitlines()[-2:]
    assert summary.startswith("courtier: stopped after"), summary
    assert where == (f"courtier: data in {data} (WARC files under {data / 'worker-0' / 'warc'}"
                     f", {data / 'worker-1' / 'warc'})")
    by_child = [warc_responses(data / f"worker-{i}" / "warc") for i in (0, 1)]
    assert all(by_child)
    index = await _cdxj(data)  # no --archive: every worker's folder, remembered in DATA
    assert {entry["url"] for entry in index} >= by_child[0] | by_child[1]
    assert {entry["filename"].split("/warc/")[0] for entry in index} == {"worker-0",
                                                                          "worker-1"}
    # reparse and archive gc read the captures of both folders too
    reparsed = await _courtier_json("reparse", "--data", str(data), "--store", pg_dsn)
    assert reparsed["captures"] > 0 and reparsed["unreadable"] == 0, reparsed
    gc = await _courtier_json("archive", "gc", "--data", str(data), "--store", pg_dsn,
                              "--keep-last", "1", "--dry-run")
    assert gc["files_seen"] == len(list(data.glob("worker-*/warc/*.warc.gz"))), gc
    stopping = [line for line in seen if "stopping (SIGTERM)" in line]
    assert len(stopping) == 2 and all(" INFO " in line for line in stopping), stopping
    assert not [line for line in seen if " WARNING " in line or " ERROR " in line]
    pages = [r for r in log if not r.path_qs.startswith("/robots")]
    counts = collections.Counter(server.url(r.host, r.path_qs) for r in pages)
    assert {u: n for u, n in counts.items() if n > 1} == {}, "a page was fetched twice"
    host_delays = {h.name: max(DELAY, h.crawl_delay) for h in spec.of_kind("crawl_delay")}
    assert politeness_violations(log, delay=DELAY, max_in_flight=1,
                                 host_delays=host_delays) == []
