"""Back-off and adaptive delay on a real socket: Retry-After (both forms), exponential
back-off without it, and a host that slows down. Every check reads the server's log.
The Retry-After and back-off tests run over plain HTTP and over HTTPS (issue 31; the
HTTPS runs seen red with the crawl's ``--ca-file`` left out: no request in the log)."""

from __future__ import annotations

import asyncio
import functools
import itertools
from pathlib import Path

import pytest

from courtier.crawl import worker as worker_module
from courtier.politeness.delays import DelayPolicy
from courtier.testweb import HostSpec, RequestRecord, TestWebServer, WebSpec, politeness_violations
from tests.integration.politeness.helpers import (
    SCHEMES,
    host_log,
    pages,
    run_crawl,
    served_over,
    start_gaps,
)

DELAY = 0.1
TOLERANCE = 0.01
ADAPTIVE_FACTOR = 5.0  # courtier's default: adaptive delay = 5 × last response time
# the crawler's exponential back-off is shortened for these tests (the production default
# starts at 5 s); Retry-After waits are longer than its first step, so a crawler that
# ignored the header and fell back to back-off would start too early: a lower bound, no
# wall-clock upper bound, tells the two apart
BACKOFF_BASE = 0.4
JITTER = 0.25  # courtier's default ± fraction
# a 429/503 also halves the host's rate (the AIMD throttle) from at least its floor, 1 s by
# default: 2 s, 4 s, 8 s after three in a row, longer than this back-off and than the
# Retry-After waits below, which it would hide; from the delay in force (0.1 s) instead it
# asks for 0.2 s, 0.4 s, 0.8 s, less than the back-off at each step
THROTTLE_FLOOR = 0.0


@pytest.fixture(autouse=True)
def short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real worker, with a back-off policy that starts at BACKOFF_BASE seconds and a
    throttle that starts from the delay in force."""
    monkeypatch.setattr(
        worker_module, "DelayPolicy",
        functools.partial(DelayPolicy, backoff_base=BACKOFF_BASE, throttle_floor=THROTTLE_FLOOR),
    )


async def crawl_one(spec: HostSpec, data: Path, scheme: str = "http",
                    **extra: object) -> list[RequestRecord]:
    web = WebSpec(hosts=[spec])
    server_tls, crawl_tls = served_over(scheme, web, data.parent)
    async with TestWebServer(web, **server_tls) as server:  # type: ignore[arg-type]
        assert server.web.seeds()[0].startswith(f"{scheme}://")
        await asyncio.wait_for(run_crawl(server, data, delay=DELAY, **extra, **crawl_tls), 60)
        return host_log(server.log, spec.name)


def check_retry_after(log: list[RequestRecord], status: int, min_wait: float) -> None:
    """Every busy answer's wait is obeyed (judged from the server's log alone)."""
    assert politeness_violations(log, delay=DELAY, max_in_flight=1) == []
    busy = [r for r in log if r.status == status]
    assert busy, [(r.path_qs, r.status) for r in log]
    assert min_wait > BACKOFF_BASE * (1 + JITTER)  # ignoring the header would show
    for hold in busy:
        assert hold.retry_until is not None
        assert hold.retry_until - hold.end >= min_wait - TOLERANCE
        later = [r for r in log if r.start >= hold.end]
        assert later, "the crawl went on after the busy answer"
        assert later[0].start >= hold.retry_until - TOLERANCE


@pytest.mark.timeout(60)
@pytest.mark.parametrize("scheme", SCHEMES)
async def test_retry_after_delta_seconds_is_obeyed(tmp_path: Path, scheme: str) -> None:
    spec = HostSpec("busy.test", pages=4, busy_every=3, busy_status=429, retry_after="1")
    log = await crawl_one(spec, tmp_path / "d", scheme, max_pages=7)
    assert [r.status for r in pages(log)].count(429) == 2
    check_retry_after(log, 429, 1.0)


@pytest.mark.timeout(60)
async def test_retry_after_http_date_is_obeyed(tmp_path: Path) -> None:
    # an IMF-fixdate 1 s after the next whole second: a wait of 1–2 s
    spec = HostSpec("date.test", pages=4, busy_every=3, busy_status=503, retry_after="http-date+1")
    log = await crawl_one(spec, tmp_path / "d", max_pages=7)
    assert [r.status for r in pages(log)].count(503) == 2
    check_retry_after(log, 503, 1.0)


def busy_gaps(log: list[RequestRecord], status: int) -> list[float]:
    """Seconds from the end of each busy answer to the start of the next request."""
    page_log = pages(log)
    return [nxt.start - rec.end for rec, nxt in itertools.pairwise(page_log)
            if rec.status == status]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("status", [429, 503])
async def test_without_retry_after_back_off_doubles(tmp_path: Path, status: int,
                                                    scheme: str) -> None:
    # after the index, every page request answers busy without Retry-After: each failure
    # in a row pauses the whole host twice as long as the one before
    spec = HostSpec("plain.test", pages=8, busy_every=1, busy_after=1, busy_status=status)
    log = await crawl_one(spec, tmp_path / "d", scheme, max_pages=5)
    page_log = pages(log)
    assert page_log[0].status == 200
    assert all(r.status == status and r.retry_until is None for r in page_log[1:])
    gaps = busy_gaps(log, status)
    assert len(gaps) == 3, [(r.path_qs, r.status) for r in log]
    for n, gap in enumerate(gaps):
        assert gap >= BACKOFF_BASE * 2**n * (1 - JITTER) - TOLERANCE, (n, gaps)
    # with ±25 % jitter a doubled pause is always longer than the one before: a constant
    # (or slowly growing) back-off fails here
    assert all(b > a for a, b in itertools.pairwise(gaps)), gaps
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
    # after each slow answer the crawler waits at least 5 × that answer's time
    for prev, rec in itertools.pairwise(log[3:]):
        assert rec.start - prev.end >= ADAPTIVE_FACTOR * slow - TOLERANCE
    assert min(gaps[3:]) >= (ADAPTIVE_FACTOR + 1) * slow - TOLERANCE
    assert politeness_violations(log, delay=DELAY, max_in_flight=1) == []
