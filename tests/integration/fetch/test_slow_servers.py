"""The low-speed limit (issue 14): a server dripping bytes no longer holds its host.

Each byte arrives well within the read timeout, so only the low-speed limit can
end the fetch. The total and read timeouts are set to an hour: the fetch ending
at all (with ``truncated == "slow"``) is the proof, no wall-clock bound needed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders

from courtier.archive.warc import WarcWriter
from courtier.core.errors import HeaderTimeout
from courtier.core.outcome import Outcome
from courtier.fetch.aiohttp_transport import AiohttpTransport, _SpeedCheck
from courtier.fetch.guard import AddressGuard
from courtier.fetch.resolver import Resolver
from courtier.fetch.transport import FetchLimits, FetchRequest
from tests.integration.fetch.test_aiohttp_transport import LOOPBACK, raw, read_request
from tests.unit.crawl.test_process_hostile import make_processor, page_lease

HOUR = 3600.0
SLOW = FetchLimits(read_timeout=HOUR, total_timeout=HOUR, low_speed_limit=200,
                   low_speed_time=0.5)
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n"


def warc_response_heads(root: Path) -> list[StatusAndHeaders]:
    (path,) = root.rglob("*.warc.gz")
    with path.open("rb") as stream:
        return [r.rec_headers for r in ArchiveIterator(stream)
                if r.rec_headers.get_header("WARC-Type") == "response"]


@pytest.fixture
async def client() -> AsyncIterator[AiohttpTransport]:
    resolver = Resolver(AddressGuard(allow=LOOPBACK))
    transport = AiohttpTransport(resolver)
    yield transport
    await transport.close()
    await resolver.close()


async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    writer.write(HEAD + b"<html>")
    while True:  # one byte every 20 ms: 50 B/s, each byte long before any read timeout
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(b"x")


async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    writer.write(HEAD + b"x" * 100_000)
    await writer.drain()


@pytest.mark.timeout(600)
async def test_a_dripping_body_ends_slow_long_before_the_total_timeout(
        client: AiohttpTransport, tmp_path: Path) -> None:
    server = await raw(drip)
    try:
        resp = await client.fetch(FetchRequest(server.url("/drip")), SLOW)
    finally:
        await server.close()
    assert resp.status == 200 and resp.truncated == "slow"
    assert 0 < len(resp.raw_body) < 100_000
    commit = make_processor().fetched(page_lease(server.url("/drip")), resp, 1000.0)
    assert commit.outcome is Outcome.RETRY and commit.error_kind == "truncated_slow"
    with WarcWriter(str(tmp_path)) as writer:
        writer.write_exchange(resp)
    heads = warc_response_heads(tmp_path)
    assert heads[0].get_header("WARC-Truncated") == "time"


async def test_control_a_fast_body_is_complete_under_the_same_limit(
        client: AiohttpTransport) -> None:
    server = await raw(flood)
    try:
        resp = await client.fetch(FetchRequest(server.url("/fast")), SLOW)
    finally:
        await server.close()
    assert (resp.truncated, len(resp.raw_body)) == (None, 100_000)


def test_the_rate_is_judged_over_whole_windows() -> None:
    check = _SpeedCheck(FetchLimits(low_speed_limit=100, low_speed_time=10.0), now=0.0)
    assert check.window_end == 10.0
    assert not check.too_slow(0, 9.9)        # a pause inside a window is fine
    assert not check.too_slow(1000, 10.0)    # 1000 B in 10 s = 100 B/s: a new window
    assert check.window_end == 20.0
    assert not check.too_slow(500, 15.0)
    assert check.too_slow(400, 20.0)         # 900 B in 10 s: below 100 B/s
    off = _SpeedCheck(FetchLimits(low_speed_limit=0), now=0.0)
    assert off.window_end is None and not off.too_slow(0, 1e9)


# ------------------------------------------------------- headers dripped (issue 14)

HEADER_DRIP = FetchLimits(read_timeout=HOUR, total_timeout=HOUR, header_timeout=0.5)


async def drip_headers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A status line, then one header byte every 20 ms (bounded: at most 10 minutes)."""
    await read_request(reader)
    writer.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
    for _ in range(30_000):
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(b"d")


async def test_dripping_headers_end_at_the_header_deadline(client: AiohttpTransport) -> None:
    """Each header byte beats the read timeout and the body-only low-speed limit never
    starts: before the header deadline this fetch ran until the hour-long total timeout."""
    server = await raw(drip_headers)
    try:
        with pytest.raises(HeaderTimeout) as caught:
            await client.fetch(FetchRequest(server.url("/drip-head")), HEADER_DRIP)
    finally:
        await server.close()
    assert caught.value.kind == "header_timeout" and "header deadline" in str(caught.value)
    commit = make_processor().failed(page_lease(server.url("/drip-head")), caught.value, 1000.0)
    assert commit.outcome is Outcome.RETRY and commit.error_kind == "header_timeout"
    assert commit.event["error_kind"] == "header_timeout"


async def test_control_headers_sent_at_once_are_not_cut(client: AiohttpTransport) -> None:
    server = await raw(flood)
    try:
        resp = await client.fetch(FetchRequest(server.url("/fast")), HEADER_DRIP)
    finally:
        await server.close()
    assert (resp.status, resp.truncated) == (200, None)
