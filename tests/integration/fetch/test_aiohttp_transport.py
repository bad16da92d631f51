"""AiohttpTransport against real servers on 127.0.0.1 (aiohttp.web and raw asyncio)."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import gzip
import itertools
import socket
import struct
import time
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable

import brotli
import pytest
from aiohttp import web

from courtier.core.clock import RealClock
from courtier.core.errors import (
    BlockedAddressError,
    ConnectError,
    FetchTimeout,
    ProtocolError,
)
from courtier.fetch.aiohttp_transport import AiohttpTransport
from courtier.fetch.guard import AddressGuard
from courtier.fetch.resolver import Resolver
from courtier.fetch.transport import FetchLimits, FetchRequest, FetchResponse
from courtier.fetch.write_pacer import AddressPacer

LOOPBACK = ["127.0.0.0/8"]
PAGE = b"<html><body>" + b"courtier " * 500 + b"</body></html>"
MIB = 1 << 20
FAST = FetchLimits(connect_timeout=2.0, read_timeout=2.0, total_timeout=5.0)


# ---------------------------------------------------------------- servers


#: CRC-32 of 1 GiB of zero bytes (computing it takes a second; see test_crc_constant)
CRC32_OF_1GIB_ZEROS = 0x5B64C2B0


def gzip_bomb_stream(mebibytes: int) -> tuple[list[bytes], bytes]:
    """A valid gzip stream of ``mebibytes`` MiB of zeros, as (pieces, trailer).

    After a full flush the deflate state resets, so every further MiB of zeros
    compresses to the same bytes: the stream is generated without ever
    holding more than one MiB of plain data (the list repeats one object).
    """
    zeros = bytes(MIB)
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    block = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    assert block == comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    if mebibytes == 1024:
        crc = CRC32_OF_1GIB_ZEROS
    else:
        crc = 0
        for _ in range(mebibytes):
            crc = zlib.crc32(zeros, crc)
    # final empty fixed-Huffman block, then CRC-32 and size mod 2**32
    trailer = b"\x03\x00" + struct.pack("<II", crc, (mebibytes * MIB) & 0xFFFFFFFF)
    return [first] + [block] * (mebibytes - 1), trailer


def test_bomb_generator_is_valid_gzip() -> None:
    pieces, trailer = gzip_bomb_stream(3)
    assert gzip.decompress(b"".join(pieces) + trailer) == bytes(3 * MIB)
    pieces, trailer = gzip_bomb_stream(1024)
    assert sum(map(len, pieces)) < 2 * MIB
    tail = zlib.decompressobj(31)
    assert tail.decompress(pieces[0] + pieces[1], 1) == b"\x00"


@pytest.mark.slow
def test_crc_constant() -> None:
    zeros, crc = bytes(MIB), 0
    for _ in range(1024):
        crc = zlib.crc32(zeros, crc)
    assert crc == CRC32_OF_1GIB_ZEROS


class Web:
    """An aiohttp.web test site on 127.0.0.1 that records client peers."""

    def __init__(self) -> None:
        self.peers: list[tuple[str, int]] = []
        self.host_headers: list[str] = []
        app = web.Application()
        app.router.add_get("/{name}", self.handle)
        self.runner = web.AppRunner(app, shutdown_timeout=0.5)
        self.port = 0

    async def start(self) -> None:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        self.peers.append(request.transport.get_extra_info("peername"))
        self.host_headers.append(request.headers.get("Host", ""))
        name = request.match_info["name"]
        if name == "ok":
            return web.Response(
                body=PAGE,
                headers=[("X-First", "1"), ("X-Second", "2"), ("X-First", "3")],
                content_type="text/html",
            )
        if name == "redirect":
            return web.Response(status=301, headers={"Location": "/ok"})
        if name in ("missing", "error"):
            return web.Response(status=404 if name == "missing" else 500, body=b"nope")
        if name == "echo":
            return web.Response(body=repr(list(request.raw_headers)).encode())
        if name == "big":
            return web.Response(body=b"x" * MIB)
        if name == "encoded":
            codings = request.query["ce"]
            body = PAGE
            for coding in codings.split(","):
                body = ENCODERS[coding.strip()](body)
            return web.Response(body=body, headers={"Content-Encoding": codings.replace(",", ", ")})
        if name == "gzip-bomb":
            return await self.bomb(request)
        if name == "br-bomb":
            bomb = brotli.compress(bytes(64 * MIB), quality=1)
            return web.Response(body=bomb, headers={"Content-Encoding": "br"})
        if name == "drip":
            resp = web.StreamResponse()
            await resp.prepare(request)
            for _ in range(500):  # bounded: at most 10 s
                await resp.write(b"x" * 10)
                await asyncio.sleep(0.02)
            return resp
        raise web.HTTPNotFound()

    async def bomb(self, request: web.Request) -> web.StreamResponse:
        pieces, trailer = gzip_bomb_stream(1024)  # 1 GiB of zeros
        resp = web.StreamResponse(headers={"Content-Encoding": "gzip"})
        await resp.prepare(request)
        with contextlib.suppress(ConnectionError):
            for piece in pieces:
                await resp.write(piece)
            await resp.write(trailer)
        return resp

    async def close(self) -> None:
        await self.runner.cleanup()


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
}


def raw_deflate(data: bytes) -> bytes:
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    return comp.compress(data) + comp.flush()


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class RawServer:
    """A raw asyncio TCP server on 127.0.0.1 that counts accepted connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    return await reader.readuntil(b"\r\n\r\n")


# ---------------------------------------------------------------- fixtures


@pytest.fixture
async def site() -> AsyncIterator[Web]:
    server = Web()
    await server.start()
    yield server
    await server.close()


@pytest.fixture
async def transport() -> AsyncIterator[AiohttpTransport]:
    resolver = Resolver(AddressGuard(allow=LOOPBACK), overrides={"site-a.test": ["127.0.0.1"]})
    client = AiohttpTransport(resolver)
    yield client
    await client.close()
    await resolver.close()


async def raw(handler: Handler) -> RawServer:
    server = RawServer(handler)
    await server.start()
    return server


async def connections_before_sentinel(server: RawServer) -> int:
    """How many connections ``server`` accepted before a sentinel one made now.

    Causal, not timed: the listening socket accepts in arrival order, so once the
    sentinel's request is answered, every connection attempted before it has been
    counted too (no sleep that a loaded machine could outrun)."""
    before = server.connections
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(b"GET /sentinel HTTP/1.1\r\nHost: sentinel\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        await reader.readuntil(b"\r\n\r\n")
    finally:
        writer.close()
    assert server.connections >= before + 1
    return server.connections - 1


async def get(
    client: AiohttpTransport,
    url: str,
    limits: FetchLimits = FAST,
    headers: tuple[tuple[str, str], ...] = (("User-Agent", "courtier-test/1"),),
) -> FetchResponse:
    """One fetch, bounded in time whatever the transport does."""
    return await asyncio.wait_for(client.fetch(FetchRequest(url, headers), limits), 15)


# ---------------------------------------------------------------- responses


async def test_200_with_headers_and_body(site: Web, transport: AiohttpTransport) -> None:
    resp = await get(transport, site.url("/ok"))
    assert resp.status == 200
    assert resp.reason == "OK"
    assert resp.http_version == "1.1"
    assert resp.body == PAGE
    assert resp.raw_body == PAGE
    assert resp.truncated is None
    names = [k for k, _ in resp.headers]
    firsts = [v for k, v in resp.headers if k == "X-First"]
    assert firsts == ["1", "3"]
    assert names.index("X-First") < names.index("X-Second")
    assert resp.header("content-type") == "text/html"
    assert resp.header("content-length") == str(len(PAGE))
    assert resp.remote_ip == "127.0.0.1"
    assert resp.started_at > 1_600_000_000
    assert 0 <= resp.ttfb <= resp.elapsed
    sent = dict(resp.request_headers)
    assert sent["Host"] == f"127.0.0.1:{site.port}"
    assert sent["User-Agent"] == "courtier-test/1"
    assert sent["Accept-Encoding"] == "gzip, deflate, br"


async def test_request_headers_are_sent_in_order_and_accept_encoding_is_ours(
    site: Web, transport: AiohttpTransport
) -> None:
    headers = (
        ("User-Agent", "ua/2"),
        ("If-None-Match", '"abc"'),
        ("Accept-Encoding", "zstd"),
        ("If-Modified-Since", "Sat, 01 Jan 2022 00:00:00 GMT"),
    )
    resp = await get(transport, site.url("/echo"), headers=headers)
    received = ast.literal_eval(resp.body.decode())  # repr of the server's raw header list
    names = [k.decode() for k, _ in received]
    assert (
        names.index("User-Agent") < names.index("If-None-Match") < names.index("If-Modified-Since")
    )
    assert (b"Accept-Encoding", b"gzip, deflate, br") in received
    assert all(v != b"zstd" for _, v in received)
    assert [(k.encode(), v.encode()) for k, v in resp.request_headers] == received


async def test_default_user_agent_is_not_aiohttps(site: Web, transport: AiohttpTransport) -> None:
    resp = await get(transport, site.url("/ok"), headers=())
    user_agent = dict(resp.request_headers)["User-Agent"]
    assert user_agent.startswith("courtier/")


async def test_redirect_is_returned_not_followed(site: Web, transport: AiohttpTransport) -> None:
    resp = await get(transport, site.url("/redirect"))
    assert resp.status == 301
    assert resp.header("Location") == "/ok"
    assert len(site.peers) == 1


@pytest.mark.parametrize(("path", "status"), [("/missing", 404), ("/error", 500)])
async def test_error_statuses_are_responses(
    site: Web, transport: AiohttpTransport, path: str, status: int
) -> None:
    resp = await get(transport, site.url(path))
    assert resp.status == status
    assert resp.body == b"nope"


@pytest.mark.parametrize("codings", ["gzip", "deflate", "br", "gzip,br", "br,deflate,gzip"])
async def test_content_encodings_are_decoded(
    site: Web, transport: AiohttpTransport, codings: str
) -> None:
    resp = await get(transport, site.url(f"/encoded?ce={codings}"))
    assert resp.header("Content-Encoding") == codings.replace(",", ", ")
    assert resp.raw_body != PAGE
    assert resp.body == PAGE
    assert resp.truncated is None


async def test_raw_deflate_and_multi_member_gzip() -> None:
    bodies = {
        b"/raw": (b"deflate", raw_deflate(PAGE)),
        b"/multi": (b"gzip", gzip.compress(PAGE[:100]) + gzip.compress(PAGE[100:])),
        b"/bad": (b"gzip", b"\x1f\x8b\x08\x00garbage-not-gzip"),
        b"/zstd": (b"zstd", b"\x28\xb5\x2f\xfdwhatever"),
        b"/trailing": (b"gzip", gzip.compress(PAGE) + b"\r\n\r\n"),
        b"/exact": (b"br", brotli.compress(PAGE)),
    }

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            request = await read_request(reader)
            coding, body = bodies[request.split(b" ")[1]]
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Encoding: "
                + coding
                + b"\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\n\r\n"
                + body
            )
            await writer.drain()

    server = await raw(handler)
    client = AiohttpTransport(Resolver(AddressGuard(allow=LOOPBACK)))
    try:
        assert (await get(client, server.url("/raw"))).body == PAGE
        assert (await get(client, server.url("/multi"))).body == PAGE
        bad = await get(client, server.url("/bad"))
        assert bad.truncated == "encoding"
        assert bad.raw_body == bodies[b"/bad"][1]
        unknown = await get(client, server.url("/zstd"))
        assert unknown.truncated == "encoding"
        assert unknown.body == b""
        assert unknown.raw_body == bodies[b"/zstd"][1]
        trailing = await get(client, server.url("/trailing"))
        assert (trailing.body, trailing.truncated) == (PAGE, None)
        exact = FetchLimits(max_decoded_bytes=len(PAGE), max_body_bytes=len(bodies[b"/exact"][1]))
        whole = await get(client, server.url("/exact"), exact)
        assert (whole.body, whole.truncated) == (PAGE, None)
        one_less = FetchLimits(max_decoded_bytes=len(PAGE) - 1)
        cut = await get(client, server.url("/exact"), one_less)
        assert (cut.body, cut.truncated) == (PAGE[:-1], "decoded")
    finally:
        await client.close()
        await server.close()


# ---------------------------------------------------------------- caps


async def test_gzip_bomb_stops_at_decoded_cap_with_bounded_memory(
    site: Web, transport: AiohttpTransport
) -> None:
    cap = 4 * MIB
    limits = FetchLimits(total_timeout=10.0, max_decoded_bytes=cap)
    tracemalloc.start()
    try:
        resp = await get(transport, site.url("/gzip-bomb"), limits)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert resp.status == 200
    assert resp.truncated == "decoded"
    assert len(resp.body) == cap
    assert resp.body == bytes(cap)
    assert len(resp.raw_body) < 256 * 1024  # stopped reading long before 1 GiB
    print(f"peak traced memory {peak / MIB:.1f} MiB")
    assert peak < 4 * cap  # body + its parts + the server's 1 MiB of zeros


async def test_brotli_bomb_stops_at_decoded_cap(site: Web, transport: AiohttpTransport) -> None:
    cap = MIB
    limits = FetchLimits(total_timeout=10.0, max_decoded_bytes=cap)
    resp = await get(transport, site.url("/br-bomb"), limits)
    assert resp.truncated == "decoded"
    assert len(resp.body) == cap


async def test_body_over_max_body_bytes_is_truncated(
    site: Web, transport: AiohttpTransport
) -> None:
    limits = FetchLimits(max_body_bytes=100_000)
    resp = await get(transport, site.url("/big"), limits)
    assert resp.status == 200
    assert resp.truncated == "length"
    assert resp.raw_body == b"x" * 100_000
    assert resp.body == resp.raw_body


async def test_slow_drip_is_stopped_by_total_timeout(
    site: Web, transport: AiohttpTransport
) -> None:
    # the drip writes 5000 bytes over 10 s and never stalls for the read timeout, so only
    # the total timeout can cut the body short ("time", fewer than 5000 bytes)
    limits = FetchLimits(connect_timeout=1.0, read_timeout=3600.0, total_timeout=0.4)
    resp = await get(transport, site.url("/drip"), limits)
    assert resp.status == 200
    assert resp.truncated == "time"
    assert 0 < len(resp.body) < 5000
    assert set(resp.body) == {ord("x")}


async def test_stall_mid_body_hits_read_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello")
        await writer.drain()
        await reader.read()  # until the client gives up

    server = await raw(handler)
    client = AiohttpTransport(Resolver(AddressGuard(allow=LOOPBACK)))
    try:
        # the total timeout is far beyond the test's own limit: only the read timeout
        # can end this fetch before pytest-timeout fails the test
        limits = FetchLimits(read_timeout=0.2, total_timeout=3600.0)
        resp = await get(client, server.url(), limits)
        assert resp.truncated == "time"
        assert resp.body == b"hello"
    finally:
        await client.close()
        await server.close()


async def test_reset_mid_body_keeps_partial_body() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"a" * 100)
        await writer.drain()
        writer.close()

    server = await raw(handler)
    client = AiohttpTransport(Resolver(AddressGuard(allow=LOOPBACK)))
    try:
        resp = await get(client, server.url())
        assert resp.status == 200
        assert resp.truncated == "disconnect"
        assert resp.raw_body == b"a" * 100
    finally:
        await client.close()
        await server.close()


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize(
    "limits",
    [
        # the other timeout is an hour: only the one under test can end the fetch
        # before pytest-timeout fails the test
        FetchLimits(connect_timeout=1.0, read_timeout=3600.0, total_timeout=0.3),
        FetchLimits(connect_timeout=1.0, read_timeout=0.3, total_timeout=3600.0),
    ],
    ids=["total", "read"],
)
async def test_server_that_never_answers_times_out(limits: FetchLimits) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await reader.read()  # never answer

    server = await raw(handler)
    client = AiohttpTransport(Resolver(AddressGuard(allow=LOOPBACK)))
    try:
        with pytest.raises(FetchTimeout):
            await get(client, server.url(), limits)
    finally:
        await client.close()
        await server.close()


async def test_connection_refused_is_connect_error(transport: AiohttpTransport) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ConnectError):
        await get(transport, f"http://127.0.0.1:{port}/")


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 abc Nope\r\n\r\n",
        b"garbage\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Big: " + b"v" * 20_000 + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n"
        + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 900) for i in range(20))
        + b"\r\n",
    ],
    ids=["bad-status", "not-http", "long-header", "headers-over-total-cap"],
)
async def test_invalid_response_is_protocol_error(reply: bytes) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(reply)
        await writer.drain()
        await reader.read()

    server = await raw(handler)
    client = AiohttpTransport(Resolver(AddressGuard(allow=LOOPBACK)))
    try:
        with pytest.raises(ProtocolError):
            await get(client, server.url(), FetchLimits(max_header_bytes=8192, total_timeout=5))
    finally:
        await client.close()
        await server.close()


async def test_server_closing_without_reply_is_connect_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)

    server = await raw(handler)
    client = AiohttpTransport(Resolver(AddressGuard(allow=LOOPBACK)))
    try:
        with pytest.raises(ConnectError):
            await get(client, server.url())
    finally:
        await client.close()
        await server.close()


# ---------------------------------------------------------------- connections and names


async def test_keep_alive_reuses_one_connection() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(10):
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    server = await raw(handler)
    client = AiohttpTransport(Resolver(AddressGuard(allow=LOOPBACK)))
    try:
        for _ in range(3):
            resp = await get(client, server.url())
            assert resp.body == b"ok"
        assert server.connections == 1
    finally:
        await client.close()
        await server.close()


async def test_keep_alive_with_aiohttp_server(site: Web, transport: AiohttpTransport) -> None:
    await get(transport, site.url("/ok"))
    await get(transport, site.url("/missing"))
    assert len(site.peers) == 2
    assert site.peers[0] == site.peers[1]


async def test_truncated_response_does_not_poison_the_pool(
    site: Web, transport: AiohttpTransport
) -> None:
    first = await get(transport, site.url("/big"), FetchLimits(max_body_bytes=1000))
    assert first.truncated == "length"
    second = await get(transport, site.url("/ok"))
    assert second.body == PAGE
    assert second.truncated is None


async def test_hostname_resolved_through_overrides(site: Web, transport: AiohttpTransport) -> None:
    resp = await get(transport, site.url("/ok", host="site-a.test"))
    assert resp.status == 200
    assert resp.body == PAGE
    assert resp.remote_ip == "127.0.0.1"
    assert site.host_headers == [f"site-a.test:{site.port}"]
    assert dict(resp.request_headers)["Host"] == f"site-a.test:{site.port}"


async def test_exactly_one_lookup_per_fetch_and_no_rebinding(site: Web) -> None:
    answers = [["127.0.0.1"], ["10.255.255.1"]]
    lookups: list[str] = []

    class Rebinding(Resolver):
        async def _lookup(self, name: str) -> tuple[list[str], float | None]:
            lookups.append(name)
            return answers[min(len(lookups), 2) - 1], 0.0

    resolver = Rebinding(AddressGuard(allow=LOOPBACK), ttl=0.0)
    client = AiohttpTransport(resolver)
    try:
        resp = await get(client, site.url("/ok", host="rebind.test"))
        assert resp.remote_ip == "127.0.0.1"
        assert lookups == ["rebind.test"]
        with pytest.raises(BlockedAddressError, match=r"10\.255\.255\.1"):
            await get(client, site.url("/missing", host="rebind.test"))
        assert len(site.peers) == 1
    finally:
        await client.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "site-a.test", "[::1]"])
async def test_loopback_without_allow_is_blocked_before_connecting(host: str) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    server = await raw(handler)
    client = AiohttpTransport(Resolver(AddressGuard(), overrides={"site-a.test": ["127.0.0.1"]}))
    try:
        with pytest.raises(BlockedAddressError, match="--allow-network"):
            await get(client, f"http://{host}:{server.port}/")
        assert await connections_before_sentinel(server) == 0
    finally:
        await client.close()
        await server.close()


@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1/x", "file:///etc/passwd", "http:///nohost", "http://a.test:99999/"]
)
async def test_non_http_urls_are_refused(transport: AiohttpTransport, url: str) -> None:
    with pytest.raises(BlockedAddressError):
        await get(transport, url)


async def test_closed_transport_refuses_fetches(site: Web) -> None:
    client = AiohttpTransport(Resolver(AddressGuard(allow=LOOPBACK)))
    assert (await get(client, site.url("/ok"))).status == 200
    await client.close()
    with pytest.raises(ConnectError, match="closed"):
        await get(client, site.url("/ok"))


# ---------------------------------------------------------------- the write pacer


class GatedPacer(AddressPacer):
    """A pacer that holds every write until the test opens its gate, noting the
    addresses it was asked about."""

    def __init__(self) -> None:
        super().__init__(RealClock(), 0.001)
        self.asked: list[str] = []
        self.asked_event = asyncio.Event()
        self.gate = asyncio.Event()

    async def wait_turn(self, address: str) -> None:
        self.asked.append(address)
        self.asked_event.set()
        await self.gate.wait()
        await super().wait_turn(address)


async def test_request_is_written_only_after_the_pacer_gives_its_turn() -> None:
    """The pacer is asked with the connected address, and nothing reaches the server
    until it answers (seen red with the connector's call of the pacer taken out: the
    pacer was never asked and the fetch went straight through)."""
    requests = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        while True:
            await read_request(reader)
            requests += 1
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    server = await raw(handler)
    pacer = GatedPacer()
    client = AiohttpTransport(Resolver(AddressGuard(allow=LOOPBACK)), write_pacer=pacer)
    try:
        fetch = asyncio.ensure_future(get(client, server.url()))
        await asyncio.wait_for(pacer.asked_event.wait(), 10)
        assert pacer.asked == ["127.0.0.1"]
        # the connection stands (the pacer is asked after connecting), the request is
        # not written: a sentinel connection made now is answered before it
        assert await connections_before_sentinel(server) == 1
        assert requests == 1  # the sentinel's own request only
        pacer.gate.set()
        resp = await fetch
        assert resp.body == b"ok"
        assert requests == 2
        await get(client, server.url())  # a pooled connection is paced too
        assert pacer.asked == ["127.0.0.1", "127.0.0.1"]
    finally:
        await client.close()
        await server.close()


async def test_writes_to_one_address_keep_the_pacers_gap() -> None:
    """Three concurrent fetches to one address with a 0.2 s pacer: the server sees
    their request starts at least 0.2 s apart (a lower bound on time only; less 0.05 s
    for the server's own reading). Seen red with the connector's call of the pacer taken
    out: the three starts 0.00002 s apart."""
    starts: list[float] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            starts.append(time.monotonic())
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    server = await raw(handler)
    client = AiohttpTransport(Resolver(AddressGuard(allow=LOOPBACK)), limit_per_host=3,
                              write_pacer=AddressPacer(RealClock(), 0.2))
    try:
        await asyncio.gather(*(get(client, server.url()) for _ in range(3)))
        starts.sort()
        assert len(starts) == 3
        assert all(b - a >= 0.2 - 0.05 for a, b in itertools.pairwise(starts)), starts
    finally:
        await client.close()
        await server.close()


async def test_an_idle_connection_is_kept_for_keepalive_seconds() -> None:
    """Two fetches 0.5 s apart: over one connection with the default keep-alive (60 s),
    over two with ``keepalive_seconds`` 0.1 (the pooled one was closed while idle).
    Seen red with the connector built without ``keepalive_timeout`` (both transports
    reused their connection: the 0.1 s one too)."""
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    counts = []
    for keep in (None, 0.1):
        server = await raw(handler)
        resolver = Resolver(AddressGuard(allow=LOOPBACK))
        client = AiohttpTransport(resolver) if keep is None \
            else AiohttpTransport(resolver, keepalive_seconds=keep)
        try:
            await get(client, server.url())
            await asyncio.sleep(0.5)  # idle time passing, not ordering events
            await get(client, server.url())
            counts.append(server.connections)
        finally:
            await client.close()
            await server.close()
    assert counts == [1, 2]
