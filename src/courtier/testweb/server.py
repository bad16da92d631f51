"""One aiohttp server on 127.0.0.1 serving every virtual host, with an access log.

The server dispatches on the ``Host`` header, so a crawler reaches
``h01.courtier.test`` by mapping the name to 127.0.0.1 (``--resolve`` with
:meth:`TestWeb.hosts_file_text`). Each request is appended to
:attr:`TestWebServer.log` as a :class:`RequestRecord`; that log is the
independent observer of politeness that :func:`politeness_violations` checks.

Per-host behaviours that depend on request counts (busy answers with
``Retry-After``, a host that slows down) are applied here; the counts start
at zero when the server starts.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
import time
import weakref
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse

from courtier.core.errors import ConfigError
from courtier.testweb.responses import PageResponse, is_robots_path, normalize_path
from courtier.testweb.site import TestWeb
from courtier.testweb.spec import HostSpec, WebSpec, render_retry_after

#: the body is written in pieces of this size, so a client that goes away is noticed
_WRITE_PIECE = 64 * 1024


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request as the server saw it.

    ``host`` is the Host header without port, lower-cased; ``path_qs`` the raw
    request target; ``start`` (``time.monotonic()``) is taken when the handler
    begins, ``end`` once the response has been fully written. ``retry_until``
    (same clock) is set on a busy answer whose ``Retry-After`` the server
    knows how to read: no request to the host may start before it.
    ``user_agent`` is the request's User-Agent header (tests tell workers apart
    by a comment in it). ``body_sent`` counts the body bytes the server wrote before the
    response ended or the client went away (written in 64 KiB pieces, each awaited);
    ``whole`` is False when the client closed the connection before the body was all
    written. ``scheme`` is the one the request came over: ``https`` on the TLS port,
    ``http`` on a plain one (an HTTP web, or the plain side of an HTTPS web). ``accept``
    is the request's Accept header (None when it sent none).
    """

    host: str
    path_qs: str
    method: str
    start: float
    end: float
    status: int
    peer_port: int | None
    retry_until: float | None = None
    user_agent: str = ""
    body_sent: int = 0
    whole: bool = True
    scheme: str = "http"
    accept: str | None = None


class _ConnectionCountingServer(web.Server):
    """aiohttp's low-level server, telling ``on_connection`` of each connection made
    (for TLS: once its handshake has completed)."""

    def __init__(self, handler: Callable[[BaseRequest], Awaitable[StreamResponse]],
                 on_connection: Callable[[asyncio.Transport], None]) -> None:
        super().__init__(handler)
        self._on_connection = on_connection

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        self._on_connection(transport)


class HeldResponse:
    """A response the server holds open (:meth:`TestWebServer.hold_next`).

    ``arrived`` is set when the request it holds has reached the server (its
    ``user_agent`` is then known); the response is written once :meth:`release`
    is called. A client that closes the connection meanwhile (a cancelled fetch)
    ends the request as the server sees it: the hold ends within ``POLL`` seconds,
    the log records that end and ``cut`` is set.
    """

    POLL = 0.01

    __slots__ = ("_released", "arrived", "cut", "host", "path", "target", "user_agent")

    def __init__(self, host: str, path: str | None) -> None:
        self.host = host
        self.path = path
        self.arrived = asyncio.Event()
        self.user_agent = ""
        self.target = ""  # the held request's raw request target, once arrived
        self.cut = False
        self._released = asyncio.Event()

    def matches(self, host: str, path: str) -> bool:
        if host != self.host or self.arrived.is_set():
            return False
        if self.path is None:
            return not is_robots_path(path)
        return path == self.path

    def release(self) -> None:
        """Let the held response go (idempotent)."""
        self._released.set()

    async def hold(self, target: str, user_agent: str, gone: Callable[[], bool]) -> None:
        """Wait for :meth:`release`, or until ``gone()`` says the client left."""
        self.target = target
        self.user_agent = user_agent
        self.arrived.set()
        while not self._released.is_set():
            if gone():
                self.cut = True
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.POLL):
                    await self._released.wait()


class TestWebServer:
    """Serves a :class:`WebSpec` on ``127.0.0.1:port`` (port 0 picks a free one).

    Usable as ``async with TestWebServer(spec) as server``. ``web`` and
    ``port`` are valid after :meth:`start`. Latency configured on a host is
    awaited before its response is sent (``slow_latency`` once the host has
    had ``slow_after`` requests); every ``busy_every``-th page request of a
    host answers busy; ``If-None-Match`` with the current ETag answers 304. A
    host's ``changing_pages`` get a new text and ETag at every request.
    :meth:`hold_next` holds the next matching request open until the test
    releases it.

    With ``ssl_context`` (see :mod:`courtier.testweb.tls`) the server speaks
    HTTPS only and every URL of :attr:`web` is ``https://``; a request whose TLS
    handshake fails never reaches the handler, so it is not in :attr:`log`. Each
    completed handshake is counted by the name the client asked for (SNI) in
    :attr:`tls_handshakes` (and in :attr:`tls_resumed` when it resumed a session):
    one per TLS connection, whatever number of requests it then carries.
    ``plain_http=True`` (with ``ssl_context``) also listens for plain HTTP on
    :attr:`http_port`, where the hosts answer as their ``HostSpec.http_redirect``
    says; those requests are logged too, with ``scheme="http"``.
    ``on_request`` is called with each record as it is appended to :attr:`log` (the
    access log of ``courtier testweb serve``).
    """

    __test__ = False  # not a pytest test class

    def __init__(self, spec: WebSpec, port: int = 0, host: str = "127.0.0.1",
                 ssl_context: ssl.SSLContext | None = None,
                 on_request: Callable[[RequestRecord], None] | None = None,
                 plain_http: bool = False) -> None:
        if plain_http and ssl_context is None:
            raise ConfigError("TestWebServer: plain_http is the plain side of an HTTPS web "
                              "(give ssl_context too)")
        self.spec = spec
        self.plain_http = plain_http
        #: the plain-HTTP port of an HTTPS web started with ``plain_http`` (else None)
        self.http_port: int | None = None
        #: completed TLS handshakes by the server name the client sent (SNI), and those
        #: that resumed a session
        self.tls_handshakes: collections.Counter[str] = collections.Counter()
        self.tls_resumed: collections.Counter[str] = collections.Counter()
        self._sni: weakref.WeakKeyDictionary[ssl.SSLObject, str] = weakref.WeakKeyDictionary()
        self._on_request = on_request
        self.bind_host = host
        self.ssl_context = ssl_context
        self._requested_port = port
        self._port: int | None = None
        self._web: TestWeb | None = None
        self._runner: web.ServerRunner | None = None
        self.log: list[RequestRecord] = []
        self._requests: dict[str, int] = defaultdict(int)  # host → requests so far
        self._page_requests: dict[str, int] = defaultdict(int)  # host → non-robots requests
        self._editions: dict[tuple[str, str], int] = defaultdict(int)  # changing pages served
        self._holds: list[HeldResponse] = []

    @property
    def port(self) -> int:
        if self._port is None:
            raise ConfigError("TestWebServer is not started")
        return self._port

    @property
    def web(self) -> TestWeb:
        if self._web is None:
            raise ConfigError("TestWebServer is not started")
        return self._web

    def base_url(self, host: str) -> str:
        """``http(s)://host:port`` of a virtual host."""
        return self.web.base_url(host)

    def url(self, host: str, path: str) -> str:
        return self.web.url(host, path)

    async def start(self) -> None:
        """Bind and start serving; idempotent. Raises ConfigError if the port is taken."""
        if self._runner is not None:
            return
        if self.ssl_context is not None:
            self._name_connections(self.ssl_context)
        runner = web.ServerRunner(_ConnectionCountingServer(self._handle, self._connected),
                                  access_log=None)
        await runner.setup()
        sites = [web.TCPSite(runner, self.bind_host, self._requested_port,
                             ssl_context=self.ssl_context)]
        if self.plain_http:
            sites.append(web.TCPSite(runner, self.bind_host, 0))
        try:
            for site in sites:
                await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(
                f"testweb cannot listen on port {self._requested_port}: {exc}"
            ) from exc
        # one socket a site (an IPv4 or IPv6 address), in the order the sites started
        ports = [int(addr[1]) for addr in runner.addresses
                 if isinstance(addr, tuple) and len(addr) >= 2]
        if len(ports) != len(sites):
            await runner.cleanup()
            raise ConfigError("testweb server did not report its listening ports")
        self._runner = runner
        self._port = ports[0]
        self.http_port = ports[1] if self.plain_http else None
        self._web = TestWeb(self.spec, ports[0],
                            scheme="http" if self.ssl_context is None else "https",
                            http_port=self.http_port)

    def _name_connections(self, context: ssl.SSLContext) -> None:
        """Note the server name (SNI) each TLS client asks for, keeping any callback the
        context had."""
        earlier = context.sni_callback

        def note(ssl_object: ssl.SSLObject, name: str | None,
                 ctx: ssl.SSLContext) -> int | None:
            self._sni[ssl_object] = (name or "").lower()
            return earlier(ssl_object, name or "", ctx) if earlier is not None else None

        context.sni_callback = note

    def _connected(self, transport: asyncio.Transport) -> None:
        ssl_object = transport.get_extra_info("ssl_object")
        if isinstance(ssl_object, ssl.SSLObject):
            name = self._sni.get(ssl_object, "")
            self.tls_handshakes[name] += 1
            if ssl_object.session_reused:
                self.tls_resumed[name] += 1

    def hold_next(self, host: str, path: str | None = None) -> HeldResponse:
        """Hold the next request to ``host`` (for ``path``, a raw request target; any page
        when None, robots files never) open after its latency, until the returned
        :meth:`HeldResponse.release`. Every hold is released when the server stops."""
        held = HeldResponse(host.lower(), path)
        self._holds.append(held)
        return held

    async def stop(self) -> None:
        """Stop serving and close connections; idempotent."""
        for held in self._holds:
            held.release()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> TestWebServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _handle(self, request: BaseRequest) -> StreamResponse:
        start = time.monotonic()
        host = _host_name(request.host or "")
        peer = request.transport.get_extra_info("peername") if request.transport else None
        peer_port = int(peer[1]) if isinstance(peer, tuple) and len(peer) >= 2 else None
        status = 0
        retry_until: float | None = None
        sent, whole = 0, True
        try:
            spec = self.spec.host(host)
            self._requests[host] += 1
            if spec is not None:
                latency = spec.latency_for(self._requests[host])
                if latency > 0:
                    await asyncio.sleep(latency)
            held = next((h for h in self._holds
                         if h.matches(host, normalize_path(request.raw_path))), None)
            if held is not None:
                await held.hold(request.raw_path, request.headers.get("User-Agent", ""),
                                lambda: request.transport is None
                                or request.transport.is_closing())
                if held.cut:  # nobody to answer: the log records the end now
                    status = 499
                    return StreamResponse(status=status)
            page = self.web.plain_http_page(host, request.raw_path) \
                if self.plain_http and request.scheme == "http" else None
            if page is None:  # an https request, or the plain side serves the same
                page, retry_until = self._page(host, spec, request.raw_path)
            status, body = page.status, page.body
            etag = page.header("ETag")
            if etag is not None and etag in request.headers.get("If-None-Match", ""):
                status, body = 304, b""
            resp = StreamResponse(status=status)
            for name, value in page.headers:
                resp.headers[name] = value
            if status != 304:
                resp.content_length = len(body)
            await resp.prepare(request)
            try:
                for offset in range(0, len(body) if request.method != "HEAD" else 0,
                                    _WRITE_PIECE):
                    piece = body[offset:offset + _WRITE_PIECE]
                    await resp.write(piece)
                    sent += len(piece)
                await resp.write_eof()
            except ConnectionError:  # aiohttp's ClientConnectionResetError among them
                whole = False  # the client went away: logged here, not an error
            return resp
        finally:
            end = time.monotonic()
            record = RequestRecord(host, request.raw_path, request.method, start, end, status,
                                   peer_port, retry_until,
                                   request.headers.get("User-Agent", ""), sent, whole,
                                   request.scheme, request.headers.get("Accept"))
            self.log.append(record)
            if self._on_request is not None:
                self._on_request(record)

    def _page(self, host: str, spec: HostSpec | None,
              target: str) -> tuple[PageResponse, float | None]:
        """The answer to ``target`` (a raw request target) of ``host`` on the web's own
        port, with its changing editions and busy answers, and the monotonic time a
        busy answer's Retry-After asks to wait until."""
        page = self.web.page(host, target)
        retry_until = None
        if spec is not None and spec.changing_pages:
            self._editions[(host, target)] += 1
            page = self.web.edition(host, target, page, self._editions[(host, target)])
        if spec is not None and not is_robots_path(normalize_path(target)):
            self._page_requests[host] += 1
            if spec.is_busy(self._page_requests[host]):
                page, retry_until = self._busy(spec)
        return page, retry_until

    def _busy(self, spec: HostSpec) -> tuple[PageResponse, float | None]:
        """The busy answer and the monotonic time its Retry-After asks to wait until."""
        value, wait = render_retry_after(spec.retry_after, time.time())
        until = None if wait is None else time.monotonic() + wait
        return self.web.busy_page(spec, value), until

    def requests_for(self, host: str) -> list[RequestRecord]:
        """The log entries of one host, in arrival order."""
        return [r for r in self.log if r.host == host.lower()]

    def fetched_urls(self, method: str = "GET") -> set[str]:
        """Canonical URLs requested with ``method`` (robots files included)."""
        return {
            self.web.url(r.host, normalize_path(r.path_qs)) for r in self.log if r.method == method
        }


def _host_name(header: str) -> str:
    """The host of a Host header value: port removed, lower-case, no trailing dot."""
    bracket = header.startswith("[")
    name = header[: header.find("]") + 1] if bracket else header.rsplit(":", 1)[0]
    return name.lower().rstrip(".")


def politeness_violations(
    log: Iterable[RequestRecord],
    delay: float,
    max_in_flight: int,
    tolerance: float = 0.01,
    *,
    host_delays: Mapping[str, float] | None = None,
) -> list[str]:
    """Describe every politeness violation in ``log``; empty when compliant.

    Per host: a request whose start makes more than ``max_in_flight``
    requests overlap (intervals are half-open ``[start, end)``), every pair
    of consecutive request starts closer than ``delay - tolerance``, and every
    request that starts after a busy answer ended but more than ``tolerance``
    before that answer's ``retry_until``. ``host_delays`` overrides ``delay``
    per host (e.g. a Crawl-delay host).
    """
    by_host: dict[str, list[RequestRecord]] = defaultdict(list)
    for rec in log:
        by_host[rec.host].append(rec)
    problems: list[str] = []
    for host in sorted(by_host):
        recs = sorted(by_host[host], key=lambda r: r.start)
        need = (host_delays or {}).get(host, delay)
        open_ends: list[float] = []
        prev: RequestRecord | None = None
        holds = [r for r in recs if r.retry_until is not None]
        for rec in recs:
            for hold in holds:
                until = hold.retry_until or 0.0
                if hold.end <= rec.start < until - tolerance:
                    problems.append(
                        f"{host}: {rec.method} {rec.path_qs} started {until - rec.start:.3f}s "
                        f"before the Retry-After of {hold.path_qs} ({hold.status}) ran out"
                    )
            open_ends = [e for e in open_ends if e > rec.start]
            open_ends.append(rec.end)
            if len(open_ends) > max_in_flight:
                problems.append(
                    f"{host}: {len(open_ends)} requests in flight at {rec.start:.3f} "
                    f"(max {max_in_flight}) when {rec.method} {rec.path_qs} started"
                )
            if prev is not None and rec.start - prev.start < need - tolerance:
                problems.append(
                    f"{host}: {rec.method} {rec.path_qs} started {rec.start - prev.start:.3f}s "
                    f"after {prev.path_qs} (delay {need:.3f}s)"
                )
            prev = rec
    return problems


def max_overlap(log: Iterable[RequestRecord]) -> int:
    """The largest number of requests (of any hosts) in flight at once ([start, end))."""
    events = sorted(
        [(r.start, 1) for r in log] + [(r.end, -1) for r in log],
        key=lambda e: (e[0], e[1]),  # at equal times an end (-1) comes before a start
    )
    best = current = 0
    for _, step in events:
        current += step
        best = max(best, current)
    return best


async def serve_testweb(
    spec: WebSpec,
    port: int = 0,
    *,
    on_ready: Callable[[TestWebServer], None] | None = None,
) -> None:
    """Serve ``spec`` until the task is cancelled; ``on_ready`` runs once listening."""
    async with TestWebServer(spec, port) as server:
        if on_ready is not None:
            on_ready(server)
        await asyncio.Event().wait()
