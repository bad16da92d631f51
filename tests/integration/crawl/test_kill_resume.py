"""kill -9 in the middle of a crawl, then resume on the same --data."""

from __future__ import annotations

import asyncio
import collections
import signal
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from courtier.store.event_counts import EventCounts
from courtier.store.open import make_store
from courtier.testweb import TestWebServer, default_web, politeness_violations
from courtier.testweb.killloop import run_crawler

DELAY = 0.1
#: seconds a run may take before it counts as hung: no bound on speed (a run on the
#: local Citus cluster took 60 s of its own at load 8 on two shared cores)
HANG_GUARD = 240.0


@pytest.mark.timeout(600)
@pytest.mark.parametrize("crawl_store", ["sqlite", "postgres", "citus"], indirect=True)
async def test_kill_9_then_resume_equals_an_uninterrupted_crawl(
    tmp_path: Path, crawl_store: str | None
) -> None:
    """On SQLite, PostgreSQL and a database of the local Citus cluster (a coordinator and
    two worker nodes, issue 30): every page fetched, a committed one never again, one
    outbox event per URL, the event counters equal to a recount of the outbox at the
    kill and at the end, every WARC readable, no politeness violation after the kill.

    Seen red on Citus only (SQLite and PostgreSQL passed) with the commit's event counts
    skipped on Citus (``add_commit_counts`` not called when ``on_citus``): the counters
    differ from the outbox at the kill. Not exercised here, though named by issue 30's
    review: the commit's epoch fence and its version check (the outbox's dedup). The
    resumed process has the killed one's worker id (``DATA/worker-id``) and takes its
    leases back at the same epochs, and no commit is replayed. Those are the contract
    suite's on Citus and the kill/join tests' (tests/integration/cluster).
    """
    spec = default_web(n_hosts=6, pages_per_host=10, crawl_delay=0.3)
    async with TestWebServer(spec) as server:
        resolve = tmp_path / "hosts.txt"
        resolve.write_text(server.web.hosts_file_text())
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(server.web.seeds()) + "\n")
        data = tmp_path / "data"
        args = [
            "crawl",
            "--data",
            str(data),
            "--seeds-file",
            str(seeds),
            "--resolve",
            str(resolve),
            "--allow-network",
            "127.0.0.0/8",
            "--delay",
            str(DELAY),
            "--progress",
            "none",
            "--linger",
            "0",
            *(["--store", crawl_store] if crawl_store else []),
        ]
        expected = server.web.expected_fetches()
        rc = await run_crawler(args, server, kill_after=len(expected) // 2, limit=HANG_GUARD)
        assert rc == -signal.SIGKILL
        killed_at = len(server.log)
        # the URLs whose results were durable at the kill, and the stats counters
        # committed with their events, exact at the kill
        killed_counts, committed = await counted_and_recounted(crawl_store, data)
        rc = await run_crawler(args, server, kill_after=None, limit=HANG_GUARD)
        assert rc == 0
        log = list(server.log)
    gets = [r for r in log if not r.path_qs.startswith("/robots")]
    counts = collections.Counter(server.url(r.host, r.path_qs) for r in gets)
    assert set(counts) == expected
    twice = [u for u, n in counts.items() if n > 1]
    # only URLs whose result was not durable at the kill (in flight, or fetched and
    # waiting for the next commit) may be fetched again; a committed one never is
    assert not set(twice) & committed, sorted(set(twice) & committed)
    first_run = {server.url(r.host, r.path_qs) for r in log[:killed_at]}
    assert set(twice) <= first_run
    # every WARC file (including the one cut by the kill) reads cleanly with valid digests
    files = sorted((data / "warc").rglob("*.warc.gz"))
    assert files
    targets = set()
    for path in files:
        with path.open("rb") as handle:
            for record in ArchiveIterator(handle, check_digests="raise"):
                if record.rec_type in ("response", "revisit"):
                    targets.add(record.rec_headers.get_header("WARC-Target-URI"))
                    record.content_stream().read()
    # archived: every expected page but the PDFs and PNGs, which are not downloaded
    archived = server.web.expected_archived()
    assert targets >= archived and not targets & (expected - archived)
    assert politeness_violations(log[killed_at:], delay=DELAY, max_in_flight=1) == []
    # the outbox has exactly one event per URL, even for URLs fetched twice
    store = make_store(crawl_store, data)
    await store.open()
    try:
        events = await store.read_events(0, 100_000)
    finally:
        await store.close()
    urls = [e.payload["url"] for e in events]
    resumed_counts, _ = await counted_and_recounted(crawl_store, data)
    assert resumed_counts.events == len(events) > killed_counts.events
    assert len(urls) == len(set(urls))
    assert {
        u for u, e in zip(urls, events, strict=True) if e.payload["outcome"] != "robots_denied"
    } == expected


async def counted_and_recounted(crawl_store: str | None, data: Path
                                ) -> tuple[EventCounts, set[str]]:
    """The store's event counters, asserted equal to a recount of its outbox, and the
    URLs with an event (their results were committed)."""
    store = make_store(crawl_store, data)
    await store.open()
    try:
        counted = await store.event_counts()
        events = await store.read_events(0, 100_000)
    finally:
        await store.close()
    assert counted == EventCounts.of_payloads(e.payload for e in events)
    return counted, {e.payload["url"] for e in events}


@pytest.mark.timeout(180)
async def test_ctrl_c_stops_gracefully_and_the_next_run_finishes(tmp_path: Path) -> None:
    spec = default_web(n_hosts=4, pages_per_host=10, crawl_delay=0.3)
    async with TestWebServer(spec) as server:
        resolve = tmp_path / "hosts.txt"
        resolve.write_text(server.web.hosts_file_text())
        data = tmp_path / "data"
        args = [
            "crawl",
            "--data",
            str(data),
            *server.web.seeds(),
            "--resolve",
            str(resolve),
            "--allow-network",
            "127.0.0.0/8",
            "--delay",
            str(DELAY),
            "--progress",
            "none",
            "--linger",
            "0",
        ]
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "courtier",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(1000):  # bounded: 20 s
            if len(server.log) >= 20:
                break
            await asyncio.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        assert b"interrupted" in out
        rc = await run_crawler(args, server, kill_after=None, limit=90.0)
        assert rc == 0
        expected = server.web.expected_fetches()
        gets = [r for r in server.log if not r.path_qs.startswith("/robots")]
        counts = collections.Counter(server.url(r.host, r.path_qs) for r in gets)
    assert set(counts) == expected
    assert max(counts.values()) == 1  # in-flight fetches finished and were committed
