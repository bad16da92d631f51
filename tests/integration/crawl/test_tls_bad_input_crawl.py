"""Issue 31's TLS bad input in one real crawl: an expired certificate, a certificate for
another name, a self-signed one, a server that accepts TCP and never finishes the
handshake, one that closes mid-handshake and one that speaks only TLS 1.0, each a host
of its own beside a good https host.

Judged from the servers' own side: the good host's log (every page fetched), and each
bad server's count of the TCP connections it accepted (no retry storm: at most the
robots.txt give-up count). The transport's mapping of each failure to its kind is
tested in tests/integration/fetch/test_tls.py; here the crawl must go on and name each
host's reason in its final line.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from courtier.core.config import build_config
from courtier.crawl.app import crawl
from courtier.crawl.progress import summary_line
from courtier.politeness.robots_state import RobotsPolicy
from courtier.testweb import HostSpec, TestWebServer, WebSpec
from courtier.testweb.tls import TestCA, expired_window
from tests.integration.crawl.test_tls_crawl import flags_for

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def tls_handler(context: ssl.SSLContext) -> Handler:
    """Answer the ClientHello with ``context`` (the client is expected to refuse)."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ssl.SSLError, asyncio.IncompleteReadError):
            await writer.start_tls(context)
            await reader.read()

    return handle


async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read the ClientHello, answer nothing, wait for the client to give up."""
    await reader.read()


async def close_mid_handshake(reader: asyncio.StreamReader,
                              writer: asyncio.StreamWriter) -> None:
    """Close as soon as the ClientHello has begun."""
    await reader.read(1)


@asynccontextmanager
async def counting_server(handler: Handler) -> AsyncIterator[tuple[int, list[int]]]:
    """A loopback server: (its port, a list whose length is the connections accepted)."""
    accepted: list[int] = []

    async def counted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        try:
            await handler(reader, writer)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()

    server = await asyncio.start_server(counted, "127.0.0.1", 0)
    try:
        yield int(server.sockets[0].getsockname()[1]), accepted
    finally:
        server.close()
        await server.wait_closed()


def bad_contexts(ca: TestCA, tmp_path: Path) -> dict[str, ssl.SSLContext]:
    """Server contexts that fail a verifying TLS >= 1.2 client, by host name."""
    not_before, not_after = expired_window()
    self_signed = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    own = TestCA()  # a CA certificate served as the leaf: self-signed
    (tmp_path / "self.pem").write_bytes(own._ca.private_key_pem.bytes() + own.pem)
    self_signed.load_cert_chain(str(tmp_path / "self.pem"))
    with warnings.catch_warnings():  # TLSVersion.TLSv1 is deprecated, which is the point
        warnings.simplefilter("ignore", DeprecationWarning)
        tls10 = ca.server_context(["tls10.test"], min_version=ssl.TLSVersion.TLSv1,
                                  max_version=ssl.TLSVersion.TLSv1)
        tls10.set_ciphers("DEFAULT:@SECLEVEL=0")
    return {
        "expired.test": ca.server_context(["expired.test"], not_before=not_before,
                                          not_after=not_after),
        "wrongname.test": ca.server_context(["someone-else.test"]),
        "selfsigned.test": self_signed,
        "tls10.test": tls10,
    }


@pytest.mark.timeout(150)
async def test_every_tls_failure_is_named_and_the_crawl_goes_on(tmp_path: Path) -> None:
    """Seen red with the robots.txt failure's kind not passed on (``finish_robots``
    without ``error_kind``): the final line read ``[error 6]``, no reason named."""
    ca = TestCA()
    good = WebSpec(hosts=[HostSpec("good.test", pages=4)])
    handlers: dict[str, Handler] = {name: tls_handler(context)
                                    for name, context in bad_contexts(ca, tmp_path).items()}
    handlers["silent.test"] = never_answer
    handlers["closer.test"] = close_mid_handshake
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(
            TestWebServer(good, ssl_context=ca.server_context(["good.test"])))
        bad: dict[str, tuple[int, list[int]]] = {}
        for name, handler in handlers.items():
            bad[name] = await stack.enter_async_context(counting_server(handler))
        seeds = tuple(f"https://{name}:{port}/" for name, (port, _) in bad.items())
        config = build_config(flags_for(
            server, tmp_path, ca_file=ca.write_pem(tmp_path / "ca.pem"),
            seeds=(*server.web.seeds(), *seeds),
            hosts="".join(f"127.0.0.1 {name}\n" for name in bad)), environ={})
        status = await asyncio.wait_for(crawl(config, install_signals=False), 120)
        expected = server.web.expected_fetches()
        fetched = {server.url(r.host, r.path_qs) for r in server.log
                   if not r.path_qs.startswith("/robots")}
        accepted = {name: len(count) for name, (_, count) in bad.items()}
    # the crawl went on: the good host was fetched whole, and the crawl ended by itself
    assert fetched == expected and expected
    assert status.left_for_later
    # each bad server was tried, and not more often than robots.txt is before giving up
    give_up = RobotsPolicy().give_up_after
    assert all(1 <= n <= give_up for n in accepted.values()), accepted
    # each host's reason, as the final line gives it
    assert ("robots.txt unreachable: 6 [tls_handshake 3, tls_expired 1, "
            "tls_unknown_issuer 1, tls_wrong_name 1]") in summary_line(status), \
        summary_line(status)
