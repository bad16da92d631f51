"""Servers that drip their headers, or a robots.txt body, in a real crawl (issue 14).

One raw server on 127.0.0.1 plays three hosts (told apart by ``Host``). Every
request is answered within a bounded number of bytes; the read and total
timeouts are an hour, so the crawl ending at all shows the header deadline and
the low-speed limit ended each drip. What was fetched is judged from the
server's own log, the outcomes from the store.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

import pytest

from courtier.core.config import build_config
from courtier.core.urls import canonicalize
from courtier.crawl import worker as worker_module
from courtier.crawl.app import crawl
from courtier.politeness.delays import DelayPolicy
from courtier.store.sqlite import SqliteStore

HOUR = 3600.0
#: the host's back-off after each failed request: a dripped answer is one (5 s, then 10 s
#: before pages.test's last page by default), and how long the host waits is not judged
BACKOFF_BASE = 0.2


@pytest.fixture(autouse=True)
def short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real worker, with a back-off policy that starts at BACKOFF_BASE seconds."""
    monkeypatch.setattr(worker_module, "DelayPolicy",
                        functools.partial(DelayPolicy, backoff_base=BACKOFF_BASE))


def reply(body: bytes, content_type: bytes = b"text/html") -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n" % (content_type, len(body)) + body)


class DripServer:
    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []  # (host, path) of every request
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode()
            host = next(line.split(b":", 1)[1].strip().decode().split(":")[0]
                        for line in head.split(b"\r\n") if line.lower().startswith(b"host:"))
            self.log.append((host, path))
            await self.answer(host, path, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def answer(self, host: str, path: str, writer: asyncio.StreamWriter) -> None:
        base = f"http://{host}:{self.port}"
        if (host, path) in {("heads.test", "/robots.txt"), ("pages.test", "/slow-head"),
                            ("pages.test", "/sitemap.xml")}:
            writer.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
            await drip(writer)
        elif host == "cut.test" and path == "/robots.txt":
            # the group starts, and its Disallow line never comes
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                         b"Content-Length: 100000\r\n\r\nUser-agent: *\n")
            await drip(writer)
        elif path == "/robots.txt":
            writer.write(reply(f"User-agent: *\nAllow: /\nSitemap: {base}/sitemap.xml\n"
                               .encode(), b"text/plain"))
        elif host == "pages.test" and path == "/":
            writer.write(reply(b'<html><body><a href="/slow-head">s</a> <a href="/fine">f</a>'
                               b"</body></html>"))
        else:
            writer.write(reply(b"<html><body>end</body></html>"))
        await writer.drain()


async def drip(writer: asyncio.StreamWriter) -> None:
    for _ in range(30_000):  # one byte every 20 ms, at most 10 minutes
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(b"#")


async def url_row(data: Path, url: str) -> dict[str, object]:
    store = SqliteStore(data / "courtier.db")
    await store.open()
    try:
        row = await store.get_url(canonicalize(url).url_key)
    finally:
        await store.close()
    assert row is not None, url
    return dict(row)


@pytest.mark.timeout(300)
async def test_dripped_headers_and_a_dripped_robots_txt_do_not_hold_the_crawl(
        tmp_path: Path) -> None:
    server = DripServer()
    listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.port = port = listening.sockets[0].getsockname()[1]
    try:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text("127.0.0.1 heads.test pages.test cut.test\n")
        config = build_config(
            {"data": tmp_path / "data",
             "seeds": (f"http://heads.test:{port}/", f"http://pages.test:{port}/",
                       f"http://cut.test:{port}/private"),
             "resolve": hosts, "allow_network": ("127.0.0.0/8",), "delay": 0.0,
             "progress": "none", "linger": 0.0, "max_retries": 0,
             "read_timeout": HOUR, "total_timeout": HOUR, "header_timeout": 1.0,
             "low_speed_limit": 200, "low_speed_time": 1.0},
            environ={})
        await crawl(config, install_signals=False)
    finally:
        listening.close()
        await listening.wait_closed()
    log = server.log
    # a robots.txt whose headers never end is unreachable: nothing else of its host
    assert [p for h, p in log if h == "heads.test"] == ["/robots.txt"]
    # a robots.txt cut by the low-speed limit is not obeyed as the whole file
    assert [p for h, p in log if h == "cut.test"] == ["/robots.txt"]
    assert {("pages.test", "/slow-head"), ("pages.test", "/sitemap.xml"),
            ("pages.test", "/fine")} <= set(log)
    for path in ("/slow-head", "/sitemap.xml"):
        row = await url_row(tmp_path / "data", f"http://pages.test:{port}{path}")
        assert (row["outcome"], row["error_kind"]) == ("error", "header_timeout"), path
    fine = await url_row(tmp_path / "data", f"http://pages.test:{port}/fine")
    assert fine["outcome"] == "ok"
