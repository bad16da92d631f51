"""AiohttpTransport (and the page pipeline behind it) against hostile servers (issue 5).

Every server here is a raw asyncio server on 127.0.0.1 that answers a bounded
number of requests; every fetch is bounded in time by :func:`get`. Each test
ends in a named outcome: a ``truncated`` value, a :class:`FetchError`
subclass, or a commit without links.
"""

from __future__ import annotations

import asyncio
import gzip
import random
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable

import pytest

from courtier.core.errors import BlockedAddressError, FetchError, ProtocolError
from courtier.core.outcome import Outcome
from courtier.fetch.aiohttp_transport import AiohttpTransport
from courtier.fetch.guard import AddressGuard
from courtier.fetch.resolver import Resolver
from courtier.fetch.transport import FetchLimits, FetchResponse
from tests.integration.fetch.test_aiohttp_transport import (
    FAST,
    LOOPBACK,
    MIB,
    PAGE,
    RawServer,
    connections_before_sentinel,
    get,
    gzip_bomb_stream,
    raw,
    read_request,
)
from tests.unit.crawl.test_process_hostile import make_processor, page_lease

#: what a well-behaved answer to request number n looks like
Reply = Callable[[int], bytes]
HTML_WITH_LINKS = (
    b"<html><head><title>t</title></head><body>"
    + b"".join(b'<a href="/p%d">p%d</a>' % (i, i) for i in range(50))
    + b"</body></html>"
)


def ok(body: bytes, content_type: bytes = b"text/plain") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
        % (content_type, len(body))
        + body
    )


def numbered(n: int) -> bytes:
    return ok(b"real-%d" % n)


class Scripted:
    """A raw server whose ``n``-th request overall (1-based) is answered by
    ``script[n]`` when present (then the connection is closed if ``close``),
    else by :func:`numbered`. At most 10 requests per connection."""

    def __init__(self, script: dict[int, bytes], close: bool = True) -> None:
        self.script = script
        self.close_after_script = close
        self.requests = 0
        self.server: RawServer | None = None

    async def handler(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(10):
            await read_request(reader)
            self.requests += 1
            scripted = self.script.get(self.requests)
            writer.write(scripted if scripted is not None else numbered(self.requests))
            await writer.drain()
            if scripted is not None and self.close_after_script:
                return  # RawServer closes the writer

    async def start(self) -> RawServer:
        self.server = await raw(self.handler)
        return self.server


@pytest.fixture
async def client() -> AsyncIterator[AiohttpTransport]:
    resolver = Resolver(AddressGuard(allow=LOOPBACK))
    transport = AiohttpTransport(resolver)
    yield transport
    await transport.close()
    await resolver.close()


async def assert_still_usable(client: AiohttpTransport, server: RawServer, n: int) -> None:
    resp = await get(client, server.url(f"/after-{n}"))
    assert (resp.status, resp.body, resp.truncated) == (200, b"real-%d" % n, None)


# ------------------------------------------------------- 1. Content-Length lies


async def test_content_length_over_body_keeps_partial_body_as_disconnect(
    client: AiohttpTransport,
) -> None:
    partial = HTML_WITH_LINKS[: len(HTML_WITH_LINKS) // 2]
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n"
    script = Scripted({1: head % len(HTML_WITH_LINKS) + partial})
    server = await script.start()
    try:
        resp = await get(client, server.url("/short"))
        assert resp.status == 200
        assert resp.truncated == "disconnect"
        assert resp.raw_body == partial == resp.body
        commit = make_processor().fetched(page_lease(server.url("/short")), resp, 1000.0)
        assert commit.outcome is Outcome.RETRY  # a cut transfer is fetched again
        assert commit.error_kind == "truncated_disconnect"
        assert list(commit.new_urls) == []  # the half page was not parsed as complete
        assert commit.title is None
        await assert_still_usable(client, server, 2)
    finally:
        await server.close()


async def test_content_length_matching_body_is_parsed(client: AiohttpTransport) -> None:
    """Control for the test above: the same page sent whole yields its links."""
    script = Scripted({1: ok(HTML_WITH_LINKS, b"text/html")}, close=False)
    server = await script.start()
    try:
        resp = await get(client, server.url("/whole"))
        assert resp.truncated is None
        commit = make_processor().fetched(page_lease(server.url("/whole")), resp, 1000.0)
        assert len(commit.new_urls) == 50
    finally:
        await server.close()


SMUGGLED = ok(b"smuggled")


@pytest.mark.parametrize(
    "extra",
    [b"EXTRA-GARBAGE-AFTER-THE-BODY", SMUGGLED, b"x" * 200_000],
    ids=["garbage", "smuggled-response", "200k-extra"],
)
async def test_content_length_under_body_extra_bytes_in_same_write(
    client: AiohttpTransport, extra: bytes
) -> None:
    """Extra bytes behind a short Content-Length, sent with the response.

    aiohttp may reject the whole read (ProtocolError: the bytes after the body
    are no status line) or return the response; either way the extra bytes are
    never body, and the next request gets its own answer.
    """
    script = Scripted({1: b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello" + extra})
    server = await script.start()
    try:
        try:
            resp = await get(client, server.url("/1"))
        except ProtocolError:
            pass
        else:
            assert (resp.body, resp.raw_body, resp.truncated) == (b"hello", b"hello", None)
        for n in (2, 3):
            await assert_still_usable(client, server, n)
    finally:
        await server.close()


@pytest.mark.parametrize(
    "extra",
    [SMUGGLED, b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n", b"EXTRA-GARBAGE"],
    ids=["smuggled-response", "unsolicited-408", "garbage"],
)
async def test_bytes_on_idle_pooled_connection_are_not_the_next_response(
    client: AiohttpTransport, extra: bytes
) -> None:
    """The response is complete (short Content-Length) and the connection goes
    back to the pool; then the server sends more. The next request must not be
    answered with those bytes (it was: /2 got "smuggled", /3 got /2's reply)."""
    sent = asyncio.Event()
    released = asyncio.Event()
    requests = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        for _ in range(10):
            await read_request(reader)
            requests += 1
            if requests == 1:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
                await writer.drain()
                await released.wait()  # the client has the response: the connection is idle
                writer.write(extra)
                await writer.drain()
                sent.set()
            else:
                writer.write(numbered(requests))
                await writer.drain()

    server = await raw(handler)
    try:
        first = await get(client, server.url("/1"))
        assert (first.body, first.truncated) == (b"hello", None)
        released.set()
        await sent.wait()
        # whether the client's loop has already read the extra bytes or they still wait in
        # its socket buffer, the next request must not take them for its answer
        for _ in range(3):
            await asyncio.sleep(0)
        for n in (2, 3):
            resp = await get(client, server.url(f"/{n}"))
            assert (resp.status, resp.body) == (200, b"real-%d" % n)
        assert server.connections == 2  # the poisoned connection was dropped
    finally:
        await server.close()


# ------------------------------------------------------- 2. chunked without its end


@pytest.mark.parametrize(
    ("chunks", "kept"),
    [
        (b"5\r\nhello\r\n6\r\n world\r\n", b"hello world"),  # no 0-chunk
        (b"5\r\nhello\r\n10\r\nhalf", b"hellohalf"),  # closed inside a chunk
        (b"5\r\nhello\r\n0\r\n", b"hello"),  # 0-chunk without the final CRLF
    ],
    ids=["no-last-chunk", "mid-chunk", "no-final-crlf"],
)
async def test_chunked_body_cut_short_is_truncated(
    client: AiohttpTransport, chunks: bytes, kept: bytes
) -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    script = Scripted({1: head + chunks})
    server = await script.start()
    try:
        resp = await get(client, server.url("/chunked"))
        assert resp.status == 200
        assert resp.truncated == "disconnect"
        assert resp.raw_body.startswith(b"hello")
        assert kept.startswith(resp.raw_body)
        await assert_still_usable(client, server, 2)
    finally:
        await server.close()


async def test_chunked_body_with_huge_chunk_size_is_capped(client: AiohttpTransport) -> None:
    """A chunk that claims 2**64-1 bytes: the read stops at max_body_bytes, never
    by allocating the claimed size."""
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    script = Scripted({1: head + b"FFFFFFFFFFFFFFFF\r\n" + b"y" * 300_000})
    server = await script.start()
    try:
        resp = await get(client, server.url("/huge"), FetchLimits(max_body_bytes=100_000))
        assert resp.truncated == "length"
        assert resp.raw_body == b"y" * 100_000
        await assert_still_usable(client, server, 2)
    finally:
        await server.close()


# ------------------------------------------------------- 3. nested encodings


def _deflate(data: bytes) -> bytes:
    return zlib.compress(data)


@pytest.mark.parametrize(
    ("header", "encode"),
    [
        (b"gzip, deflate", lambda body: _deflate(gzip.compress(body))),
        (b"deflate, gzip", lambda body: gzip.compress(_deflate(body))),
        (b"gzip,gzip", lambda body: gzip.compress(gzip.compress(body))),
        (b"GZIP , Deflate", lambda body: _deflate(gzip.compress(body))),
    ],
    ids=["gzip-then-deflate", "deflate-then-gzip", "gzip-twice", "odd-spelling"],
)
async def test_nested_content_encodings_are_decoded(
    client: AiohttpTransport, header: bytes, encode: Callable[[bytes], bytes]
) -> None:
    body = encode(PAGE)
    reply = (
        b"HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nContent-Length: %d\r\n\r\n"
        % (header, len(body))
        + body
    )
    script = Scripted({1: reply}, close=False)
    server = await script.start()
    try:
        resp = await get(client, server.url("/nested"))
        assert resp.raw_body == body
        assert (resp.body, resp.truncated) == (PAGE, None)
    finally:
        await server.close()


async def test_nested_encoding_in_wrong_order_is_an_encoding_truncation(
    client: AiohttpTransport,
) -> None:
    body = gzip.compress(_deflate(PAGE))  # deflate applied first, but labelled the other way
    reply = (
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip, deflate\r\nContent-Length: %d\r\n\r\n"
        % len(body)
        + body
    )
    script = Scripted({1: reply}, close=False)
    server = await script.start()
    try:
        resp = await get(client, server.url("/wrong-order"))
        assert resp.truncated == "encoding"
        assert resp.raw_body == body
        assert resp.body != PAGE
    finally:
        await server.close()


async def test_nested_gzip_bomb_stops_at_decoded_cap(client: AiohttpTransport) -> None:
    """gzip(gzip(1 GiB of zeros)): about 12 KB on the wire, stopped at 4 MiB."""
    pieces, trailer = gzip_bomb_stream(1024)
    outer = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = b"".join(outer.compress(piece) for piece in pieces)
    bomb += outer.compress(trailer) + outer.flush()
    assert len(bomb) < 64 * 1024
    reply = (
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip, gzip\r\nContent-Length: %d\r\n\r\n" % len(bomb)
        + bomb
    )
    script = Scripted({1: reply}, close=False)
    server = await script.start()
    cap = 4 * MIB
    tracemalloc.start()
    try:
        resp = await get(client, server.url("/bomb"), FetchLimits(max_decoded_bytes=cap))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await server.close()
    assert resp.truncated == "decoded"
    assert len(resp.body) == cap
    assert resp.body == bytes(cap)
    assert peak < 4 * cap


# ------------------------------------------------------- 4. header floods


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 200 OK\r\nX-Huge: " + b"v" * 100_000 + b"\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\n"
        + b"".join(b"X-H%d: v\r\n" % i for i in range(5_000))
        + b"Content-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 " + b"R" * 100_000 + b"\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nX-Endless: " + b"v" * 100_000,  # never ends, then closes
    ],
    ids=["100kb-header-line", "5000-headers", "100kb-reason", "unterminated-100kb"],
)
async def test_header_floods_are_protocol_errors_and_transport_survives(
    client: AiohttpTransport, reply: bytes
) -> None:
    script = Scripted({1: reply})
    server = await script.start()
    try:
        with pytest.raises(FetchError) as caught:
            await get(client, server.url("/flood"))
        if reply.endswith(b"ok"):
            assert isinstance(caught.value, ProtocolError)
        await assert_still_usable(client, server, 2)
    finally:
        await server.close()


# ------------------------------------------------------- 5. binary and oversized pages


async def test_random_binary_served_as_html_is_processed(client: AiohttpTransport) -> None:
    junk = random.Random(5).randbytes(MIB)
    script = Scripted({1: ok(junk, b"text/html; charset=utf-8")}, close=False)
    server = await script.start()
    try:
        resp = await get(client, server.url("/junk"))
        assert (resp.body, resp.truncated) == (junk, None)
        commit = make_processor().fetched(page_lease(server.url("/junk")), resp, 1000.0)
        assert commit.outcome is Outcome.OK
    finally:
        await server.close()


async def test_12mb_single_line_page_is_truncated_and_not_parsed(
    client: AiohttpTransport,
) -> None:
    links = b"".join(b'<a href="/l%d">l</a>' % i for i in range(100))
    page = b"<html><title>big</title><body>" + links + b"z" * (12 * MIB) + b"</body></html>"
    script = Scripted({1: ok(page, b"text/html")}, close=False)
    server = await script.start()
    try:
        limits = FetchLimits(max_body_bytes=10 * MIB, total_timeout=10.0)
        resp = await get(client, server.url("/big"), limits)
        assert resp.truncated == "length"
        assert len(resp.raw_body) == 10 * MIB
        assert resp.body == page[: 10 * MIB]
        commit = make_processor().fetched(page_lease(server.url("/big")), resp, 1000.0)
        assert commit.outcome is Outcome.OK
        assert commit.error_kind == "truncated_length"
        assert list(commit.new_urls) == []  # links were in the kept part, but it is not parsed
        assert commit.title is None
        assert commit.content_length == 10 * MIB
        await assert_still_usable(client, server, 2)  # the cut connection was not pooled
    finally:
        await server.close()


# ------------------------------------------------------- 6. redirect to a blocked address


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost.test"])
async def test_redirect_target_on_loopback_is_blocked_before_connecting(host: str) -> None:
    """A page redirects to a loopback URL; the crawl does not allow loopback."""
    script = Scripted({})
    listening = await script.start()
    target = f"http://{host}:{listening.port}/"
    processor = make_processor()
    redirect = FetchResponse(
        url="http://site.test/a", status=301, reason="Moved", http_version="1.1",
        headers=[("Location", target)], raw_body=b"", body=b"",
    )  # fmt: skip
    commit = processor.fetched(page_lease("http://site.test/a"), redirect, 1000.0)
    assert [new.url for new in commit.new_urls] == [target]  # scope "any" admits it...
    resolver = Resolver(AddressGuard(), overrides={"localhost.test": ["127.0.0.1"]})
    strict = AiohttpTransport(resolver)
    try:
        for url in (target, "http://127.0.0.1:1/"):
            with pytest.raises(BlockedAddressError):  # ...the transport refuses it
                await get(strict, url, FAST)
        assert await connections_before_sentinel(listening) == 0
    finally:
        await strict.close()
        await resolver.close()
        await listening.close()
