"""Back-off and adaptive delay on a real socket: Retry-After (both forms), exponential
back-off without it, and a host that slows down. Every check reads the server's log."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from courtier.testweb import HostSpec, RequestRecord, TestWebServer, WebSpec, politeness_violations
from tests.integration.politeness.helpers import host_log, pages, run_crawl, start_gaps

DELAY = 0.1
TOLERANCE = 0.01
# how late after the wait ran out the next request may start and still count as
# "the header was used" (the exponential fallback would wait >= 3.75 s)
SLACK = 1.2
ADAPTIVE_FACTOR = 5.0  # courtier's default: adaptive delay = 5 × last response time


async def crawl_one(spec: HostSpec, data: Path, **extra: object) -> list[RequestRecord]:
    async with TestWebServer(WebSpec(hosts=[spec])) as server:
        await asyncio.wait_for(run_crawl(server, data, delay=DELAY, **extra), 60)
        return host_log(server.log, spec.name)


def check_retry_after(log: list[RequestRecord], status: int, min_wait: float) -> None:
    """Every busy answer's wait is obeyed (server-side) and not replaced by a longer one."""
    assert politeness_violations(log, delay=DELAY, max_in_flight=1) == []
    busy = [r for r in log if r.status == status]
    assert len(busy) >= 2, [(r.path_qs, r.status) for r in log]
    for hold in busy:
        assert hold.retry_until is not None
        wait = hold.retry_until - hold.end
        assert wait >= min_wait - TOLERANCE
        later = [r for r in log if r.start >= hold.end]
        assert later, "the crawl went on after the busy answer"
        nxt = later[0]
        assert nxt.start >= hold.retry_until - TOLERANCE
        assert nxt.start - hold.end < wait + SLACK, "Retry-After ignored: fell back to back-off"


@pytest.mark.timeout(60)
async def test_retry_after_delta_seconds_is_obeyed(tmp_path: Path) -> None:
    spec = HostSpec("busy.test", pages=4, busy_every=3, busy_status=429, retry_after="1")
    log = await crawl_one(spec, tmp_path / "d", max_pages=7)
    assert [r.status for r in pages(log)].count(429) == 2
    check_retry_after(log, 429, 1.0)


@pytest.mark.timeout(60)
async def test_retry_after_http_date_is_obeyed(tmp_path: Path) -> None:
    # an IMF-fixdate 1 s after the next whole second: a wait of 1–2 s
    spec = HostSpec("date.test", pages=4, busy_every=3, busy_status=503, retry_after="http-date+1")
    log = await crawl_one(spec, tmp_path / "d", max_pages=7)
    assert [r.status for r in pages(log)].count(503) == 2
    check_retry_after(log, 503, 1.0)


@pytest.mark.timeout(60)
async def test_without_retry_after_back_off_starts_at_five_seconds(tmp_path: Path) -> None:
    spec = HostSpec("plain.test", pages=3, busy_every=2, busy_status=503)
    log = await crawl_one(spec, tmp_path / "d", max_pages=3)
    page_log = pages(log)
    assert [r.status == 503 for r in page_log] == [False, True, False]
    busy, nxt = page_log[1], page_log[2]
    assert busy.retry_until is None  # no header sent
    # 5 s ± 25 % jitter, counted from when the crawler saw the answer
    gap = nxt.start - busy.end
    assert 5.0 * 0.75 - TOLERANCE <= gap < 5.0 * 1.25 + SLACK
    assert politeness_violations(log, delay=DELAY, max_in_flight=1) == []


@pytest.mark.timeout(60)
async def test_a_host_that_slows_down_gets_longer_gaps(tmp_path: Path) -> None:
    slow = 0.15
    spec = HostSpec("slow.test", pages=4, slow_after=3, slow_latency=slow)
    log = await crawl_one(spec, tmp_path / "d", max_pages=7)
    assert len(log) == 8  # robots.txt + 7 pages
    durations = [r.end - r.start for r in log]
    assert all(d >= slow for d in durations[3:])  # the host really became slow
    gaps = start_gaps(log)
    # while the host is fast, only the configured delay separates requests
    assert max(gaps[:3]) < ADAPTIVE_FACTOR * slow
    # after each slow answer the crawler waits at least 5 × that answer's time
    for prev, rec in itertools.pairwise(log[3:]):
        assert rec.start - prev.end >= ADAPTIVE_FACTOR * slow - TOLERANCE
    assert min(gaps[3:]) >= (ADAPTIVE_FACTOR + 1) * slow - TOLERANCE
    assert politeness_violations(log, delay=DELAY, max_in_flight=1) == []
