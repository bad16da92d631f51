"""The real :class:`~courtier.fetch.transport.Transport`: one aiohttp session.

Contract beyond the protocol:

* Only ``http(s)`` URLs with a host are fetched; anything else raises
  :class:`BlockedAddressError` (refused by policy, nothing is sent).
* The host is resolved once through :class:`~courtier.fetch.resolver.Resolver`
  (which applies the SSRF guard) *before* any connection is made; aiohttp's
  own DNS cache is disabled and its resolver is an adapter that hands back
  exactly the addresses this fetch checked, so the socket goes to a checked
  address (no second lookup, no DNS rebinding); IP literals are checked too.
* Keep-alive connections are pooled per host; one that received bytes while
  idle is closed, never reused (no response desync). Redirects are never
  followed, cookies never stored, environment proxies ignored.
* ``Accept-Encoding: gzip, deflate, br`` is always sent (replacing a caller's
  value) and the body is decoded here, not by aiohttp: nested encodings are
  undone in reverse order, ``deflate`` may be zlib-wrapped or raw, a gzip
  body may hold several members. Decoding is incremental in bounded pieces,
  so a decompression bomb never allocates past ``max_decoded_bytes``.
* ``FetchResponse.truncated`` is one of: ``"length"`` (raw body reached
  ``max_body_bytes``), ``"decoded"`` (decoded body reached
  ``max_decoded_bytes``), ``"time"`` (total or read timeout after the
  headers arrived), ``"slow"`` (the body stayed under ``low_speed_limit``
  bytes/s for ``low_speed_time`` seconds: a server dripping bytes, each one
  in time for the read timeout, no longer holds its host until the total
  timeout),
  ``"disconnect"`` (the connection broke mid-body),
  ``"encoding"`` (unknown or corrupt Content-Encoding; ``body`` holds what
  decoded before the error, empty for an unknown coding), ``"type"`` (a 2xx
  whose Content-Type is outside ``FetchRequest.only_types``: the body is not
  read and the connection is closed, not pooled; a missing, generic
  (``application/octet-stream``) or XML type is decided by the first 512
  decoded bytes, ``courtier.fetch.sniff``, and only those are read).
* HTTPS is verified (system trust store plus ``ca_file``, host names checked,
  TLS >= 1.2) through one :class:`ssl.SSLContext` per transport
  (``courtier.fetch.tls``); pooled keep-alive connections spare handshakes.
  Every handshake a fetch completes is reported to ``on_tls_handshake`` (when
  set) with the fetch's URL and whether the session was resumed.
* Failures before a usable response raise, each with a stable ``kind``:
  :class:`DNSError` (``dns``), :class:`BlockedAddressError` (``blocked``),
  :class:`RefusedError` (``refused``), :class:`ResetError` (``reset``: reset,
  or closed without answering), :class:`ConnectTimeout` (``connect_timeout``:
  no TCP connection in time), the :class:`TLSError` classes
  (``tls_expired``, ``tls_wrong_name``, ``tls_unknown_issuer``,
  ``tls_certificate`` for another certificate fault, ``tls_handshake``: failed,
  too old a protocol, closed or not finished within the connect timeout),
  :class:`ConnectError` (``connect``, any other connection failure),
  :class:`FetchTimeout` (``timeout``: read or total timeout before the
  headers), :class:`HeaderTimeout` (the status line
  and headers were not all there ``header_timeout`` seconds after the fetch
  began: a server dripping its headers, which the low-speed limit cannot
  judge because headers are a few hundred bytes), :class:`ProtocolError`
  (invalid status line or headers, headers over ``max_header_bytes``).
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from courtier import __version__
from courtier.core.errors import (
    BlockedAddressError,
    ConnectError,
    ConnectTimeout,
    FetchError,
    FetchTimeout,
    HeaderTimeout,
    ProtocolError,
    RefusedError,
    ResetError,
    SendRefused,
    TLSBadCertificate,
    TLSExpired,
    TLSHandshakeError,
    TLSUnknownIssuer,
    TLSWrongName,
)
from courtier.fetch.decoding import BodyDecoder, DecodedCap
from courtier.fetch.resolver import Resolver
from courtier.fetch.sniff import SNIFF_BYTES, media_type, needs_sniff, sniff, type_allowed
from courtier.fetch.tls import ResumingContext, client_context, read_ca_file
from courtier.fetch.transport import FetchLimits, FetchRequest, FetchResponse
from courtier.fetch.write_pacer import AddressPacer

ACCEPT_ENCODING: Final = "gzip, deflate, br"
DEFAULT_USER_AGENT: Final = f"courtier/{__version__}"

#: (host, port, addresses) checked by the current fetch; read by the adapter
_PINNED: contextvars.ContextVar[tuple[str, int, list[str]] | None] = contextvars.ContextVar(
    "courtier_pinned_addresses", default=None
)



#: seconds an idle pooled connection is kept (aiohttp's default, 15 s, is shorter than
#: many Crawl-delays; servers commonly keep theirs 60–75 s and close first otherwise)
KEEPALIVE_SECONDS = 60.0


class _Phase:
    """How far the current fetch's connection got: ``tls_started`` once the TCP
    connection stood and the TLS handshake began, ``connected`` once a connection
    (new or pooled) was handed to the request. Tells a connect timeout from a
    handshake that never ended, and a reset before TLS from one during it.
    ``handshakes`` holds one entry per TLS handshake the fetch completed (a new
    connection): whether its session was resumed. ``tls_object``: the TLS layer of the
    connection the request went out on (None over plain HTTP), taken when it is handed
    out: a short answer on a connection the server closes is released from the response
    before the caller sees it."""

    __slots__ = ("connected", "handshakes", "tls_object", "tls_started")

    def __init__(self) -> None:
        self.tls_started = False
        self.connected = False
        self.handshakes: list[bool] = []
        self.tls_object: ssl.SSLObject | None = None


_PHASE: contextvars.ContextVar[_Phase | None] = contextvars.ContextVar(
    "courtier_connect_phase", default=None
)


class _PinnedResolver(AbstractResolver):
    """aiohttp resolver adapter: the addresses this fetch already checked, or a
    fresh checked lookup through :class:`Resolver` when none are pinned."""

    def __init__(self, resolver: Resolver) -> None:
        self._resolver = resolver

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        pinned = _PINNED.get()
        if pinned is not None and pinned[0] == host and pinned[1] == port:
            addresses = pinned[2]
        else:
            addresses = await self._resolver.resolve(host, port)
        flags = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
        return [
            ResolveResult(
                hostname=host,
                host=ip,
                port=port,
                family=socket.AF_INET6 if ":" in ip else socket.AF_INET,
                proto=0,
                flags=flags,
            )
            for ip in addresses
        ]

    async def close(self) -> None:
        """The wrapped :class:`Resolver` belongs to the caller; nothing to release."""


class _CleanConnector(aiohttp.TCPConnector):
    """A connector that never hands out a connection with unread bytes in it.

    aiohttp parses whatever arrives on an idle pooled connection (an
    unsolicited ``408``, or a second response smuggled behind a short
    ``Content-Length``) and queues it, so the next request on that
    connection would be answered with it, and every later one with the reply
    meant for the one before. Such a connection reports ``should_close``;
    it is closed and another taken (a pooled one or a new one).

    ``write_pacer`` (when set) is waited on once the connection is ready, with the
    address it is connected to: the last per-address gap (``--ip-delay``, see
    :mod:`courtier.fetch.write_pacer`). ``send_gate`` (when set) is asked after it,
    the last moment before the request bytes are written: False refuses the request
    (:class:`~courtier.core.errors.SendRefused`) — the self-fencing check of a
    worker that may have been paused since it decided to fetch.
    """

    send_gate: Callable[[], bool] | None = None
    write_pacer: AddressPacer | None = None

    async def connect(
        self,
        req: aiohttp.ClientRequest,
        traces: list[aiohttp.tracing.Trace],
        timeout: aiohttp.ClientTimeout,  # noqa: ASYNC109 (aiohttp passes it by this name)
    ) -> aiohttp.connector.Connection:
        # every discarded connection leaves the pool, which holds at most
        # limit_per_host (or limit) of them; a fresh one is clean unless the
        # server talks before being asked
        for _ in range((self.limit_per_host or self.limit or 64) + 2):
            conn = await super().connect(req, traces, timeout)
            if self.write_pacer is not None:
                address = _peer_address(conn)
                if address is not None:
                    try:
                        await self.write_pacer.wait_turn(address)
                    except BaseException:
                        conn.release()
                        raise
            if self.send_gate is not None and not self.send_gate():
                conn.release()
                raise SendRefused(f"{req.url}: not sent: this worker's shard leases "
                                  "may have expired (self-fencing)")
            if conn.protocol is None or not conn.protocol.should_close:
                phase = _PHASE.get()
                if phase is not None:
                    phase.connected = True
                    tls_object = conn.transport.get_extra_info("ssl_object") \
                        if conn.transport is not None else None
                    if isinstance(tls_object, ssl.SSLObject):
                        phase.tls_object = tls_object
                return conn
            conn.close()
        raise aiohttp.ClientConnectionError("server sends bytes nobody asked for")

    async def _wrap_create_connection(self, *args: Any, **kwargs: Any) -> Any:
        """aiohttp opens the TCP connection, then asks asyncio for the TLS layer,
        which calls the protocol factory once TCP stands: that call marks the
        handshake's start in the fetch's :class:`_Phase`. A connection returned here
        has finished its handshake: the phase notes it, and whether its session was
        resumed."""
        phase = _PHASE.get()
        tls = phase is not None and bool(kwargs.get("ssl")) and bool(args)
        if tls and phase is not None:
            factory = args[0]

            def marked() -> Any:
                phase.tls_started = True
                return factory()

            args = (marked, *args[1:])
        made = await super()._wrap_create_connection(*args, **kwargs)
        if tls and phase is not None:
            ssl_object = made[0].get_extra_info("ssl_object")
            phase.handshakes.append(bool(getattr(ssl_object, "session_reused", False)))
        return made


def _peer_address(conn: aiohttp.connector.Connection) -> str | None:
    """The IP address a connection is connected to (None when it has no socket)."""
    transport = conn.transport
    peer = transport.get_extra_info("peername") if transport is not None else None
    return str(peer[0]) if isinstance(peer, tuple) and peer else None


#: OpenSSL verify codes (X509_V_ERR_*) by the TLS error class they mean
_EXPIRED_CODES: Final = frozenset({9, 10})  # not yet valid, expired
_WRONG_NAME_CODES: Final = frozenset({62, 63, 64})  # host name, e-mail, IP mismatch
_ISSUER_CODES: Final = frozenset({2, 18, 19, 20, 21})  # unknown issuer, self-signed


def _tls_certificate_error(exc: aiohttp.ClientConnectorCertificateError,
                           url: str) -> FetchError:
    cert_error = exc.certificate_error
    code = getattr(cert_error, "verify_code", None)
    why = getattr(cert_error, "verify_message", None) or str(cert_error)
    if code in _EXPIRED_CODES:
        return TLSExpired(f"{url}: TLS certificate not valid now: {why}")
    if code in _WRONG_NAME_CODES:
        return TLSWrongName(f"{url}: TLS certificate is for another name: {why}")
    if code in _ISSUER_CODES:
        return TLSUnknownIssuer(f"{url}: TLS certificate issuer not trusted ({why}); "
                                "a private CA can be added with --ca-file")
    return TLSBadCertificate(f"{url}: TLS certificate refused: {why}")


def _map_error(exc: BaseException, url: str, phase: _Phase | None = None) -> FetchError:
    """Map an aiohttp/OS/asyncio failure before the headers into courtier's tree;
    ``phase`` says how far the connection got (see :class:`_Phase`)."""
    if isinstance(exc, FetchError):
        return exc
    handshaking = phase is not None and phase.tls_started and not phase.connected
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return _tls_certificate_error(exc, url)
    if isinstance(exc, aiohttp.ClientSSLError):
        return TLSHandshakeError(f"{url}: TLS handshake failed: {_ssl_reason(exc)}")
    if isinstance(exc, TimeoutError):
        if handshaking:
            return TLSHandshakeError(f"{url}: TLS handshake not finished within the "
                                     "connect timeout")
        if phase is not None and not phase.connected and not phase.tls_started:
            return ConnectTimeout(f"{url}: no TCP connection within the connect timeout")
        return FetchTimeout(f"{url}: timed out before the response headers ({exc or 'total'})")
    if isinstance(exc, aiohttp.ClientConnectorError):
        os_error = exc.os_error
        if handshaking:
            return TLSHandshakeError(f"{url}: the server closed the connection during the "
                                     f"TLS handshake ({os_error or exc})")
        if isinstance(os_error, ConnectionRefusedError) or getattr(
                os_error, "errno", None) == errno.ECONNREFUSED:
            return RefusedError(f"{url}: connection refused (nothing listens on the port)")
        if isinstance(os_error, ConnectionResetError | ConnectionAbortedError):
            return ResetError(f"{url}: connection reset while connecting ({os_error})")
        return ConnectError(f"{url}: cannot connect: {os_error or exc}")
    if isinstance(exc, aiohttp.ServerDisconnectedError | ConnectionResetError):
        if handshaking:
            return TLSHandshakeError(f"{url}: the server closed the connection during the "
                                     "TLS handshake")
        return ResetError(f"{url}: server closed the connection without a response")
    if isinstance(exc, aiohttp.ClientResponseError):
        return ProtocolError(f"{url}: invalid response: {exc.message}")
    if isinstance(exc, aiohttp.InvalidURL):
        return BlockedAddressError(f"{url}: refused URL: {exc}")
    if isinstance(exc, aiohttp.ClientOSError | OSError):
        return ConnectError(f"{url}: connection failed: {exc}")
    return ProtocolError(f"{url}: {type(exc).__name__}: {exc}")


def _type_rule(request: FetchRequest, response: aiohttp.ClientResponse) -> str:
    """What ``request.only_types`` makes of this response's declared type: ``"read"``
    (wanted, or not a 2xx, or no types asked), ``"sniff"`` (missing, generic or XML: the
    first bytes decide) or ``"cut"`` (another type: the body is not read)."""
    if request.only_types is None or not 200 <= response.status < 300:
        return "read"
    kind = media_type(response.headers.get("Content-Type"))
    if kind is not None and type_allowed(kind, request.only_types):
        return "read"
    return "sniff" if needs_sniff(kind) else "cut"


def _decoded_head(raw_parts: list[bytes], decoder: BodyDecoder | None) -> bytes:
    """The decoded bytes read so far (up to a little past the sniff window)."""
    head = bytearray()
    for part in raw_parts if decoder is None else decoder.parts:
        head += part
        if len(head) >= SNIFF_BYTES:
            break
    return bytes(head)


def _hang_up(response: aiohttp.ClientResponse) -> None:
    """Close a response whose body was not read to its end, and its connection, at once.

    The transport is aborted, not closed: closing a TLS connection is a graceful shutdown
    (send close_notify, wait for the server's), and uvloop reads on meanwhile, up to 30 s,
    so a body the crawl chose not to download came off the socket anyway, while the
    server was still busy with the request (``test_tls``'s cut-body test)."""
    connection = response.connection
    transport = connection.transport if connection is not None else None
    if transport is not None:
        transport.abort()
    response.close()


def _ssl_reason(exc: aiohttp.ClientSSLError) -> str:
    inner = getattr(exc, "os_error", None)
    if isinstance(inner, ssl.SSLError):
        return str(inner.reason or inner)
    return str(inner or exc)


def _peer_ip(response: aiohttp.ClientResponse) -> str | None:
    return _peer_address(response.connection) if response.connection is not None else None


class _SpeedCheck:
    """The low-speed limit: bytes counted in windows of ``low_speed_time`` seconds."""

    def __init__(self, limits: FetchLimits, now: float) -> None:
        self.limit, self.span = limits.low_speed_limit, limits.low_speed_time
        self.started, self.bytes = now, 0

    @property
    def window_end(self) -> float | None:
        return None if self.limit <= 0 else self.started + self.span

    def too_slow(self, size: int, now: float) -> bool:
        """Count ``size`` bytes; True when a whole window stayed under the limit."""
        self.bytes += size
        if self.limit <= 0 or now - self.started < self.span:
            return False
        if self.bytes < self.limit * (now - self.started):
            return True
        self.started, self.bytes = now, 0
        return False


class AiohttpTransport:
    """HTTP/1.1 GETs over one pooled aiohttp session (see the module contract).

    ``limit_per_host`` and ``limit`` bound pooled connections per host and in
    total; ``ca_file`` is a private CA (PEM) trusted besides the system store;
    ``ssl_verify=False`` disables certificate checks (test setups only);
    ``write_pacer`` keeps the last per-address gap at the write; an idle pooled
    connection is kept ``keepalive_seconds`` (default :data:`KEEPALIVE_SECONDS`), so one
    outlives a host's delay between two requests where the server keeps it open. A bad
    ``ca_file`` raises ConfigError here; the TLS context itself is built once, at the
    first https fetch (:attr:`ssl_context`: loading the system trust store costs 20–40 ms
    of CPU, which a crawl of http URLs never needs). The session is created on the
    first fetch, inside the running loop. The ``resolver`` stays the caller's:
    :meth:`close` does not close it.
    """

    def __init__(
        self,
        resolver: Resolver,
        limit_per_host: int = 2,
        limit: int = 256,
        ssl_verify: bool = True,
        ca_file: Path | None = None,
        write_pacer: AddressPacer | None = None,
        keepalive_seconds: float = KEEPALIVE_SECONDS,
    ) -> None:
        self._resolver = resolver
        self._keepalive_seconds = keepalive_seconds
        self._limit_per_host = limit_per_host
        self._limit = limit
        self._ssl_verify = ssl_verify
        self._ca_file = ca_file
        if ca_file is not None:
            read_ca_file(ca_file)  # a bad --ca-file stops the crawl before it starts
        self._ssl_context: ssl.SSLContext | None = None
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        #: asked right before each request is written (see _CleanConnector)
        self.send_gate: Callable[[], bool] | None = None
        #: waited on right before each request is written, before send_gate
        self.write_pacer = write_pacer
        #: told of every TLS handshake a fetch completed (a new connection; pooled ones
        #: make none), with the fetch's URL and whether the TLS session was resumed;
        #: called once the fetch has its headers or has failed, handshakes that led to
        #: a failure included
        self.on_tls_handshake: Callable[[str, bool], None] | None = None

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        """The one context of every TLS connection (the trust store loaded once, when
        first asked); None without certificate checks (``ssl_verify=False``)."""
        if self._ssl_verify and self._ssl_context is None:
            self._ssl_context = client_context(self._ca_file)
        return self._ssl_context

    def _tls_for(self, scheme: str) -> ssl.SSLContext | bool:
        """aiohttp's ``ssl`` argument of a request: the context for https (False: no
        checks), True (aiohttp's "no say") for http, where it is not used."""
        if scheme != "https":
            return True
        context = self.ssl_context
        return context if context is not None else False

    def _remember_session(self, tls_object: ssl.SSLObject) -> None:
        """Keep the TLS session of a fetch's connection for the server's next new
        connection (asked once the response is read: a TLS 1.3 ticket follows the
        handshake)."""
        context = self._ssl_context
        name = tls_object.server_hostname
        if isinstance(context, ResumingContext) and isinstance(name, str):
            context.remember(name, tls_object.session)

    def _get_session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise ConnectError("transport is closed")
        if self._session is None:
            connector = _CleanConnector(
                resolver=_PinnedResolver(self._resolver),
                use_dns_cache=False,
                limit=self._limit,
                limit_per_host=self._limit_per_host,
                keepalive_timeout=self._keepalive_seconds,
                ssl=False,  # each request names its context (_tls_for)
            )
            connector.send_gate = self._gate_open
            connector.write_pacer = self.write_pacer
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
                auto_decompress=False,
            )
        return self._session

    def _gate_open(self) -> bool:
        return self.send_gate is None or self.send_gate()

    async def close(self) -> None:
        """Close pooled connections; later fetches raise :class:`ConnectError`."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def fetch(self, request: FetchRequest, limits: FetchLimits) -> FetchResponse:
        """One GET of ``request.url`` under ``limits``; see the module contract."""
        try:
            url = URL(request.url, encoded=True)
            port = url.port or (443 if url.scheme == "https" else 80)
        except ValueError as exc:
            raise BlockedAddressError(f"{request.url}: refused URL: {exc}") from None
        # raw_host: the name as written (ASCII; ``host`` would IDNA-decode it, ~1 % of a
        # crawl's CPU)
        if url.scheme not in ("http", "https") or not url.raw_host:
            raise BlockedAddressError(f"{request.url}: only http(s) URLs with a host are fetched")
        session = self._get_session()
        loop = asyncio.get_running_loop()
        started_at = time.time()
        start = loop.time()
        deadline = start + limits.total_timeout
        headers = [(k, v) for k, v in request.headers if k.lower() != "accept-encoding"]
        headers.append(("Accept-Encoding", ACCEPT_ENCODING))
        if not any(k.lower() == "user-agent" for k, _ in headers):
            headers.append(("User-Agent", DEFAULT_USER_AGENT))
        line_cap = max(1024, limits.max_header_bytes)
        header_deadline = min(deadline, start + limits.header_timeout)
        token = None
        phase = _Phase()
        phase_token = _PHASE.set(phase)
        try:
            async with asyncio.timeout_at(header_deadline):
                host = url.raw_host  # the ASCII (punycode) name aiohttp asks for
                addresses = await self._resolver.resolve(host, port)
                token = _PINNED.set((host, port, addresses))
                response = await session.get(
                    url,
                    headers=headers,
                    allow_redirects=False,
                    ssl=self._tls_for(url.scheme),
                    max_line_size=line_cap,
                    max_field_size=line_cap,
                    timeout=aiohttp.ClientTimeout(
                        total=None,
                        sock_connect=limits.connect_timeout,
                        sock_read=limits.read_timeout,
                    ),
                )
        except TimeoutError as exc:
            if header_deadline < deadline and loop.time() >= header_deadline \
                    and not (phase.tls_started and not phase.connected):
                raise HeaderTimeout(
                    f"{request.url}: status line and headers not complete after"
                    f" {limits.header_timeout:g} s (header deadline)") from exc
            raise _map_error(exc, request.url, phase) from exc
        except (aiohttp.ClientError, OSError, FetchError) as exc:
            raise _map_error(exc, request.url, phase) from exc
        finally:
            _PHASE.reset(phase_token)
            if token is not None:
                _PINNED.reset(token)
            if phase.handshakes and self.on_tls_handshake is not None:
                for resumed in phase.handshakes:
                    self.on_tls_handshake(request.url, resumed)
        ttfb = loop.time() - start
        tls_object = phase.tls_object
        try:
            raw_headers = [
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers
            ]
            header_bytes = sum(len(k) + len(v) + 4 for k, v in raw_headers)
            if header_bytes > limits.max_header_bytes:
                raise ProtocolError(
                    f"{request.url}: response headers are {header_bytes} bytes,"
                    f" over the {limits.max_header_bytes}-byte cap"
                )
            remote_ip = _peer_ip(response) or addresses[0]
            truncated: str | None
            rule = _type_rule(request, response)
            if rule == "cut":
                raw_body, body, truncated = b"", b"", "type"
            else:
                raw_body, body, truncated = await self._read_body(
                    response, limits, deadline, sniffing=rule == "sniff")
        except BaseException:
            _hang_up(response)
            raise
        if tls_object is not None:
            self._remember_session(tls_object)
        if truncated is None:
            response.release()  # fully read: the connection goes back to the pool
        else:
            _hang_up(response)
        return FetchResponse(
            url=request.url,
            status=response.status,
            reason=response.reason or "",
            http_version=f"{v.major}.{v.minor}" if (v := response.version) else "1.1",
            headers=raw_headers,
            raw_body=raw_body,
            body=body,
            request_headers=[(str(k), str(v)) for k, v in response.request_info.headers.items()],
            remote_ip=remote_ip,
            started_at=started_at,
            ttfb=ttfb,
            elapsed=loop.time() - start,
            truncated=truncated,
        )

    async def _read_body(
        self, response: aiohttp.ClientResponse, limits: FetchLimits, deadline: float,
        sniffing: bool = False,
    ) -> tuple[bytes, bytes, str | None]:
        """Read, cap and decode the body; returns (raw, decoded, truncated). ``sniffing``:
        once :data:`SNIFF_BYTES` decoded bytes (or the whole body) are in, stop with
        ``"type"`` unless :func:`sniff` finds HTML or a sitemap."""
        raw_parts: list[bytes] = []
        raw_size = 0
        truncated: str | None = None
        decoder: BodyDecoder | None = None
        try:
            decoder = BodyDecoder(
                response.headers.get("Content-Encoding"), limits.max_decoded_bytes
            )
        except ValueError:
            truncated = "encoding"  # unknown coding: keep reading raw, decode nothing
        decoding = decoder is not None and bool(decoder.stages)
        speed = _SpeedCheck(limits, asyncio.get_running_loop().time())
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    window = asyncio.timeout_at(speed.window_end)
                    try:
                        async with window:
                            chunk = await response.content.readany()
                    except TimeoutError:
                        if not window.expired() or asyncio.get_running_loop().time() >= deadline:
                            raise  # the read timeout or the total one, not the window's end
                        chunk = None
                    if speed.too_slow(0 if chunk is None else len(chunk),
                                      asyncio.get_running_loop().time()):
                        truncated = "slow"
                        break
                    if chunk is None:
                        continue
                    if not chunk:
                        break
                    room = limits.max_body_bytes - raw_size
                    if len(chunk) > room:
                        chunk = chunk[:room]
                        truncated = "length"
                    raw_parts.append(chunk)
                    raw_size += len(chunk)
                    if decoding and decoder is not None:
                        try:
                            decoder.feed(chunk)
                        except DecodedCap:
                            truncated = "decoded"
                            break
                        except ValueError:
                            truncated, decoding = "encoding", False
                    if sniffing and truncated is None:  # a cut of its own comes first
                        head = _decoded_head(raw_parts, decoder if decoding else None)
                        if len(head) >= SNIFF_BYTES:
                            sniffing = False
                            if sniff(head[:SNIFF_BYTES]) == "other":
                                truncated = "type"
                                break
                    if truncated == "length":
                        break
        except TimeoutError:
            truncated = "time"
        except (aiohttp.ClientError, OSError):
            truncated = "disconnect"
        if sniffing and truncated is None and sniff(
                _decoded_head(raw_parts, decoder if decoding else None)) == "other":
            truncated = "type"  # the whole body was shorter than the window
        raw_body = b"".join(raw_parts)
        if decoder is None:
            body = b""
        elif not decoder.stages:
            body = raw_body
        else:
            body = b"".join(decoder.parts)
        return raw_body, body, truncated
