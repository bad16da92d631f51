"""The one exception tree of courtier.

::

    CourtierError
    ├── ConfigError            bad flag, file or value (exit code 2); names the flag/file/line
    ├── InvalidURL             a string that is not an absolute http(s) URL we can crawl
    ├── StoreError             the store failed (disk full, I/O, corrupted database)
    │   └── FencedError        a write carried an owner epoch that is no longer current
    ├── EventsPruned           an outbox reader's position lies below events already removed
    ├── ShardEventsPruned      a per-shard outbox reader's cursor lies below removed events
    ├── ArchiveError           a WARC file could not be written or repaired
    └── FetchError             one fetch failed before a usable HTTP response
        ├── BlockedAddressError  the SSRF guard refused the target address
        ├── DNSError             the name did not resolve
        ├── ConnectError         TCP/TLS connection failed for another reason
        │   ├── RefusedError     connection refused (nothing listens on the port)
        │   ├── ResetError       reset or closed by the server before any response
        │   └── TLSError         the TLS handshake did not end in a verified session
        │       ├── TLSExpired         certificate expired (or not yet valid)
        │       ├── TLSWrongName       certificate for another host name
        │       ├── TLSUnknownIssuer   issuer not trusted (self-signed included)
        │       ├── TLSBadCertificate  another certificate fault
        │       └── TLSHandshakeError  handshake failed, protocol too old, closed
        │                              or timed out mid-handshake
        ├── FetchTimeout         read or total timeout before the headers
        │   ├── ConnectTimeout   the TCP connection was not established in time
        │   └── HeaderTimeout    the headers were not complete by the header deadline
        └── ProtocolError        invalid status line, oversized headers, broken framing

Each :class:`FetchError` class has a stable ``kind`` (``dns``, ``refused``,
``tls_expired``, …): the ``error_kind`` of the URL's commit, its event and
``courtier url`` (docs/fetch.md lists them).

Expected per-URL results (not modified, robots denied, gone, …) are values of
:class:`courtier.core.outcome.Outcome`, never exceptions. Library errors (aiohttp,
sqlite3, OSError) are mapped into this tree at the module boundary that calls
the library.
"""

from __future__ import annotations


class CourtierError(Exception):
    """Root of every error courtier raises on purpose."""


class ConfigError(CourtierError):
    """A usage or configuration error; the message names what to fix."""


class InvalidURL(CourtierError):
    """The input is not a crawlable absolute http(s) URL."""


class StoreError(CourtierError):
    """The store could not complete an operation; nothing was half-applied."""


class FencedError(StoreError):
    """The writer's shard epoch is stale: another owner took the shard over."""


class EventsPruned(CourtierError):
    """A reader asked for the events after ``position``, but events up to
    ``pruned_through`` were removed by the outbox's retention (``--events-retention``):
    reading on would skip some silently, so the store refuses. The message names the
    oldest position still readable and what to do."""

    def __init__(self, position: int, pruned_through: int) -> None:
        self.position = position
        self.pruned_through = pruned_through
        super().__init__(
            f"events after position {position} were pruned: the outbox no longer holds "
            f"the events up to position {pruned_through} (older than --events-retention "
            f"and passed by every registered consumer). The oldest position still "
            f"readable is {pruned_through + 1}: read on with --after {pruned_through} "
            f"(after={pruned_through}), knowing the events in between are lost to this "
            "reader, and register the reader as a consumer (courtier events --consumer "
            "NAME, GET /v1/events?consumer=NAME) so that the store keeps what it has not "
            "read yet.")


class ShardEventsPruned(CourtierError):
    """A per-shard reader (``read_events_by_shard``) asked for events the outbox's retention
    already removed in some shards: reading on would skip them silently, so the store
    refuses. ``resume`` is the cursor token just above what was removed."""

    def __init__(self, shards: int, resume: str) -> None:
        self.shards = shards
        self.resume = resume
        super().__init__(
            f"events above this cursor were pruned in {shards} shard(s): the outbox no "
            "longer holds them (older than --events-retention and passed by every "
            "registered consumer). Read on from the oldest events still readable with "
            f"cursor {resume} (--cursor {resume}), knowing the events in between are lost "
            "to this reader, and register the reader as a consumer (courtier events "
            "--consumer NAME) if it may be away longer than the retention.")


class ArchiveError(CourtierError):
    """A WARC file could not be written, flushed or repaired."""


class FetchError(CourtierError):
    """A fetch ended without a usable HTTP response."""

    #: short machine-readable class for stats ("dns", "connect", "timeout", …)
    kind = "error"


class SendRefused(CourtierError):
    """A request was not sent because the worker may no longer own its shard (fenced).

    Not a :class:`FetchError`: nothing was asked of the server, so the host is not
    backed off and the URL goes back to the queue unchanged."""


class BlockedAddressError(FetchError):
    kind = "blocked"


class DNSError(FetchError):
    kind = "dns"


class ConnectError(FetchError):
    kind = "connect"


class RefusedError(ConnectError):
    """Connection refused: the host is up but nothing listens on the port."""

    kind = "refused"


class ResetError(ConnectError):
    """The server reset or closed the connection before sending a response."""

    kind = "reset"


class TLSError(ConnectError):
    """The TLS handshake did not end in a verified session."""

    kind = "tls"


class TLSExpired(TLSError):
    """The server's certificate has expired (or is not valid yet)."""

    kind = "tls_expired"


class TLSWrongName(TLSError):
    """The server's certificate does not name the host asked for."""

    kind = "tls_wrong_name"


class TLSUnknownIssuer(TLSError):
    """The certificate chain does not lead to a trusted CA (self-signed included);
    ``--ca-file`` adds a private CA."""

    kind = "tls_unknown_issuer"


class TLSBadCertificate(TLSError):
    """Another certificate fault (revoked, wrong purpose, malformed, …)."""

    kind = "tls_certificate"


class TLSHandshakeError(TLSError):
    """The handshake failed: no common protocol or cipher (TLS < 1.2), the server
    closed mid-handshake, or it did not finish in time."""

    kind = "tls_handshake"


class FetchTimeout(FetchError):
    kind = "timeout"


class ConnectTimeout(FetchTimeout):
    """The TCP connection was not established within the connect timeout."""

    kind = "connect_timeout"


class HeaderTimeout(FetchTimeout):
    """The status line and headers were not complete within the header deadline
    (a server dripping them, each byte in time for the read timeout)."""

    kind = "header_timeout"


class ProtocolError(FetchError):
    kind = "protocol"
