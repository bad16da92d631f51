"""The sniff window of ``FetchRequest.only_types`` over real sockets: a body whose type is
missing, generic or XML is read on only when its first 512 decoded bytes are HTML or a
sitemap; anything else stops there (``truncated="type"``), the connection closed."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from courtier.fetch.aiohttp_transport import AiohttpTransport
from courtier.fetch.guard import AddressGuard
from courtier.fetch.resolver import Resolver
from courtier.fetch.transport import FetchLimits, FetchRequest, FetchResponse

HTML_ONLY = frozenset({"text/html", "application/xhtml+xml"})
LIMITS = FetchLimits(connect_timeout=2.0, read_timeout=5.0, total_timeout=20.0)
BIG_PDF = b"%PDF-1.4\n" + bytes(8 << 20)  # more than aiohttp reads ahead and buffers hold
PAGE = b"<!DOCTYPE html>\n<html><head><title>t</title></head><body>" + b"x" * 4000 + \
    b"</body></html>"
SITEMAP = (b'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/'
           b'schemas/sitemap/0.9">' + b"<url><loc>http://a.test/p</loc></url>" * 200 +
           b"</urlset>")
FEED = b'<?xml version="1.0"?>\n<rss version="2.0"><channel>' + b"<item/>" * 500 + \
    b"</channel></rss>"

#: path -> (extra header lines, body as sent)
RESPONSES: dict[str, tuple[bytes, bytes]] = {
    "/untyped.pdf": (b"", BIG_PDF),
    "/tiny-untyped": (b"", b"%PDF-1.4 tiny"),
    "/untyped.html": (b"", b"<html>short</html>"),
    "/octet-gzip.html": (b"Content-Type: application/octet-stream\r\n"
                         b"Content-Encoding: gzip\r\n", gzip.compress(PAGE)),
    "/sitemap": (b"Content-Type: application/xml\r\n", SITEMAP),
    "/feed": (b"Content-Type: text/xml; charset=utf-8\r\n", FEED),
}


@asynccontextmanager
async def server(whole: dict[str, bool], ended: asyncio.Event) -> AsyncIterator[int]:
    """Serves :data:`RESPONSES`; ``whole[path]`` says whether the client took all of it;
    ``ended`` is set whenever a connection ends."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode()
            extra, body = RESPONSES[path]
            writer.write(b"HTTP/1.1 200 OK\r\n" + extra +
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
            whole[path] = False
            for offset in range(0, len(body), 65536):
                writer.write(body[offset:offset + 65536])
                await writer.drain()
            writer.write_eof()
            await reader.read()  # the client closes after reading all (or earlier)
            whole[path] = True
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            ended.set()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield listener.sockets[0].getsockname()[1]
    finally:
        listener.close()
        await listener.wait_closed()


@pytest.mark.timeout(60)
async def test_untyped_and_xml_bodies_are_sniffed() -> None:
    whole: dict[str, bool] = {}
    ended = asyncio.Event()
    resolver = Resolver(AddressGuard(allow=["127.0.0.0/8"]), overrides={"s.test": ["127.0.0.1"]})
    client = AiohttpTransport(resolver)
    try:
        async with server(whole, ended) as port:
            async def get(path: str) -> FetchResponse:
                request = FetchRequest(f"http://s.test:{port}{path}", only_types=HTML_ONLY)
                return await asyncio.wait_for(client.fetch(request, LIMITS), 20)

            pdf = await get("/untyped.pdf")
            assert (pdf.status, pdf.truncated) == (200, "type")
            assert len(pdf.raw_body) < len(BIG_PDF)
            tiny = await get("/tiny-untyped")  # shorter than the window: still judged
            assert tiny.truncated == "type"
            short = await get("/untyped.html")
            assert (short.truncated, short.body) == (None, b"<html>short</html>")
            page = await get("/octet-gzip.html")  # sniffed after decoding
            assert (page.truncated, page.body) == (None, PAGE)
            sitemap = await get("/sitemap")
            assert (sitemap.truncated, sitemap.body) == (None, SITEMAP)
            feed = await get("/feed")
            assert feed.truncated == "type"  # XML, but neither XHTML nor a sitemap
            await asyncio.wait_for(_settled(whole, ended), 20)
    finally:
        await client.close()
    # the server's side: the big PDF was not taken whole, the pages were
    assert whole["/untyped.pdf"] is False
    assert whole["/octet-gzip.html"] is True and whole["/sitemap"] is True


async def _settled(whole: dict[str, bool], ended: asyncio.Event) -> None:
    """Until every connection has ended (the server's view is final)."""
    while len(whole) < len(RESPONSES) or not (whole["/octet-gzip.html"] and whole["/sitemap"]):
        ended.clear()
        await ended.wait()
