"""The one exception tree of courtier.

::

    CourtierError
    ├── ConfigError            bad flag, file or value (exit code 2); names the flag/file/line
    ├── InvalidURL             a string that is not an absolute http(s) URL we can crawl
    ├── StoreError             the store failed (disk full, I/O, corrupted database)
    │   └── FencedError        a write carried an owner epoch that is no longer current
    ├── ArchiveError           a WARC file could not be written or repaired
    └── FetchError             one fetch failed before a usable HTTP response
        ├── BlockedAddressError  the SSRF guard refused the target address
        ├── DNSError             the name did not resolve
        ├── ConnectError         TCP/TLS connection failed or was reset
        ├── FetchTimeout         connect, read or total timeout
        │   └── HeaderTimeout    the headers were not complete by the header deadline
        └── ProtocolError        invalid status line, oversized headers, broken framing

Expected per-URL results (not modified, robots denied, gone, …) are values of
:class:`courtier.outcome.Outcome`, never exceptions. Library errors (aiohttp,
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


class FetchTimeout(FetchError):
    kind = "timeout"


class HeaderTimeout(FetchTimeout):
    """The status line and headers were not complete within the header deadline
    (a server dripping them, each byte in time for the read timeout)."""

    kind = "header_timeout"


class ProtocolError(FetchError):
    kind = "protocol"
