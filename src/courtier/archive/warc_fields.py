"""The text of WARC records, apart from writing them: payload and block digests
(``sha256:<BASE32>``), WARC-Date, record ids, header field lines, and the HTTP request
and response heads as stored (rewritten to match the stored body: see
:mod:`courtier.archive.warc`)."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from urllib.parse import urlsplit

from courtier.fetch.transport import FetchResponse

_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B32_PAIRS = [a + b for a in _B32 for b in _B32]
_REMEMBER_BYTES = 4096
#: recent large bodies and their digests, by id(); the body is held so the id stays its own
_RECENT_DIGESTS: dict[int, tuple[bytes, str]] = {}
#: more than the fetches in flight: between the worker's lookup and the write of the same
#: body, the other fetches of the batch digest theirs
_RECENT_LIMIT = 256


def sha256_digest(*parts: bytes) -> str:
    """``sha256:<BASE32>`` of the concatenated ``parts`` (RFC 4648 base32, padded;
    equal to ``base64.b32encode`` of the digest, which is pure Python and 5× slower).

    The digests of the last :data:`_RECENT_LIMIT` single large bodies are
    remembered (by identity, holding the bodies): the worker looks a payload up
    by its digest before the writer archives the same bytes object, which then
    costs no second pass, however many other fetches finished in between.
    """
    single = parts[0] if len(parts) == 1 and type(parts[0]) is bytes else None
    if single is not None:
        known = _RECENT_DIGESTS.get(id(single))
        if known is not None and known[0] is single:
            return known[1]
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(part)
    # 32 bytes + 3 zero bytes = 280 bits = 28 pairs of base32 digits; 52 are real.
    n = int.from_bytes(hasher.digest() + b"\0\0\0", "big")
    text = "".join([_B32_PAIRS[(n >> shift) & 1023] for shift in range(270, -10, -10)])
    digest = "sha256:" + text[:52] + "===="
    if single is not None and len(single) >= _REMEMBER_BYTES:
        _RECENT_DIGESTS[id(single)] = (single, digest)  # one tuple: a consistent pair
        if len(_RECENT_DIGESTS) > _RECENT_LIMIT:
            with contextlib.suppress(KeyError, StopIteration, RuntimeError):
                del _RECENT_DIGESTS[next(iter(_RECENT_DIGESTS))]  # the oldest
    return digest


def format_warc_date(timestamp: float) -> str:
    """WARC-Date for a POSIX time: UTC, microsecond precision (WARC 1.1),
    ``YYYY-MM-DDThh:mm:ss.ffffffZ`` (``isoformat`` with its ``+00:00`` as ``Z``:
    the same text as ``strftime("%Y-%m-%dT%H:%M:%S.%fZ")``, at a third of the cost)."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def record_id() -> str:
    """``<urn:uuid:…>`` of a random (version 4) UUID, formatted without ``uuid.UUID``."""
    h = os.urandom(16).hex()
    variant = "89ab"[int(h[16], 16) & 3]
    return f"<urn:uuid:{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:]}>"


def clean_field(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


def encode_head(text: str) -> bytes:
    # aiohttp decodes header bytes as UTF-8 with surrogateescape: undo that exactly.
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def field_lines(pairs: Iterable[tuple[str, str]]) -> str:
    pairs = list(pairs)
    text = "".join([f"{k}: {v}\r\n" for k, v in pairs])
    if text.count("\r") == text.count("\n") == len(pairs):  # no CR/LF inside: fast path
        return text
    return "".join([f"{clean_field(k)}: {clean_field(v)}\r\n" for k, v in pairs])


def response_http_head(response: FetchResponse) -> bytes:
    """The stored HTTP status line and headers of ``response`` (ending in a blank
    line), rewritten to match ``raw_body`` as described in the module docstring."""
    body_len = len(response.raw_body)
    version = response.http_version or "1.1"
    if not version.upper().startswith("HTTP/"):
        version = "HTTP/" + version
    pairs: list[tuple[str, str]] = []
    original: str | None = None
    for name, value in response.headers:
        lname = name.lower()
        if lname == "content-length":
            original = value.strip() if original is None else original
        elif lname == "transfer-encoding":
            pairs.append(("X-Crawler-Transfer-Encoding", value))
        else:
            pairs.append((name, value))
    if original is not None and original != str(body_len):
        pairs.append(("X-Crawler-Content-Length", original))
    pairs.append(("Content-Length", str(body_len)))
    status_line = f"{version} {response.status} {clean_field(response.reason)}"
    return encode_head(f"{status_line}\r\n{field_lines(pairs)}\r\n")


def request_http_head(response: FetchResponse) -> bytes:
    """The stored HTTP request: ``GET <path> HTTP/1.1`` and the headers as sent;
    a ``Host`` header is added first when the transport did not report one."""
    parts = urlsplit(response.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = list(response.request_headers)
    if not any(k.lower() == "host" for k, _ in headers):
        headers.insert(0, ("Host", parts.netloc.rpartition("@")[2]))
    return encode_head(f"GET {clean_field(target)} HTTP/1.1\r\n{field_lines(headers)}\r\n")
