"""The transport contract: turn one request into one response, nothing more.

Redirects, retries, politeness and robots live above the transport. A
transport never follows a redirect, never retries, and never decides whether
a URL may be fetched; it enforces only the resource caps it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class FetchLimits:
    """Caps applied to one fetch; every one of them is enforced by the transport."""

    connect_timeout: float = 10.0
    read_timeout: float = 20.0
    total_timeout: float = 60.0
    max_body_bytes: int = 10 * 1024 * 1024
    max_decoded_bytes: int = 20 * 1024 * 1024
    max_header_bytes: int = 64 * 1024
    #: curl's low-speed limit: a body slower than ``low_speed_limit`` bytes/s over any
    #: ``low_speed_time`` seconds is cut ("slow"); 0 turns it off
    low_speed_limit: int = 1024
    low_speed_time: float = 20.0
    #: the status line and every header must have arrived this many seconds after the
    #: fetch began (DNS and connect included), else :class:`HeaderTimeout`; a server
    #: dripping its headers, each byte in time for the read timeout, is cut here
    header_timeout: float = 30.0


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """One GET. ``url`` is canonical and absolute; ``headers`` are sent as given
    (User-Agent and conditional headers included) in this order."""

    url: str
    headers: Sequence[tuple[str, str]] = ()
    #: media types whose body is read (e.g. ``("text/html", "application/xhtml+xml")``;
    #: ``"image/*"`` stands for every subtype); a 2xx response that declares another
    #: Content-Type stops after its headers: empty body, ``truncated="type"``. A missing,
    #: generic (``application/octet-stream``) or XML type is sniffed
    #: (:mod:`courtier.fetch.sniff`): the body is read on only if its first 512 decoded
    #: bytes look like HTML or a sitemap. None (the default): every body is read.
    only_types: frozenset[str] | None = None


@dataclass(slots=True)
class FetchResponse:
    """What came back.

    ``raw_body`` is the payload as sent with transfer-encoding removed and
    content-encoding kept (what WARC 1.1 calls the payload); ``body`` is the
    content-decoded payload used for parsing. When the body is incomplete it
    holds what was read so far and ``truncated`` says why: "length" (body
    cap), "decoded" (decompressed-size cap), "time" (timeout after the
    headers), "slow" (below the low-speed limit), "disconnect" (the
    connection broke mid-body), "encoding" (unknown or corrupt
    Content-Encoding), "type" (a Content-Type outside the request's
    ``only_types``, or sniffed as something else: the body was not read, or not past
    its first bytes); a truncated body is never parsed
    as complete.
    """

    url: str
    status: int
    reason: str
    http_version: str
    headers: list[tuple[str, str]]
    raw_body: bytes
    body: bytes
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    remote_ip: str | None = None
    started_at: float = 0.0
    ttfb: float = 0.0
    elapsed: float = 0.0
    truncated: str | None = None

    def header(self, name: str) -> str | None:
        """The first header value with this name (case-insensitive), or None."""
        lname = name.lower()
        for key, value in self.headers:
            if key.lower() == lname:
                return value
        return None


class Transport(Protocol):
    """Performs single HTTP GETs.

    ``fetch`` returns a :class:`FetchResponse` for any HTTP status (including
    3xx, 4xx, 5xx) and raises a :class:`courtier.core.errors.FetchError` subclass
    when no usable response arrived (DNS failure, blocked address, refused
    connection, timeout before the headers, invalid status line). It must not
    follow redirects. ``close`` releases pooled connections; the transport is
    unusable afterwards.
    """

    async def fetch(self, request: FetchRequest, limits: FetchLimits) -> FetchResponse: ...

    async def close(self) -> None: ...
