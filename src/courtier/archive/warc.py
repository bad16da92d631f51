"""WARC/1.1 writer: one gzip member per record, fsspec output, rotation.

Records are built here (warcio's writer hard-codes gzip level 9, ≈1.6 ms per
record). Each record is its own gzip member, so it can be read alone from its
``(offset, length)`` and a crash can damage only the last member of a file
(see :mod:`courtier.archive.recovery`).
Members are deflated with ISA-L (``isal``), about 3× faster than zlib at the
same ratio: ``compress_level`` 1–3 is ISA-L level 1, 4–6 level 2, 7–9 level 3,
and 0 stores the data uncompressed (zlib level 0). Any gzip reader reads them.

Conventions readers of the archive rely on:

* Digests are ``sha256:<BASE32>`` — RFC 4648 base32 with ``=`` padding, the
  encoding WARC uses for ``sha1:``; warcio verifies them as written.
* ``WARC-Payload-Digest`` hashes ``FetchResponse.raw_body``: transfer-encoding
  removed, content-encoding kept (WARC 1.1 §6.3.2).
* The stored HTTP response head is made to match the stored body:
  ``Transfer-Encoding`` becomes ``X-Crawler-Transfer-Encoding`` (the body is
  de-chunked; replay must not de-chunk it again); ``Content-Length`` is set to
  ``len(raw_body)``, keeping a different original value as
  ``X-Crawler-Content-Length``; ``Content-Encoding`` is kept as sent.
* CR/LF inside header names or values become spaces (no header injection).
* A request and its response always share a file: rotation happens after a
  write once the file holds ``max_file_bytes``. Files are opened lazily, and a
  ``<name>.open`` marker beside a file exists until it is closed cleanly.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import socket
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any
from urllib.parse import urlsplit

import fsspec
from fsspec.implementations.local import LocalFileSystem
from isal import isal_zlib

from courtier.errors import ArchiveError, ConfigError
from courtier.fetch.transport import FetchResponse

REVISIT_IDENTICAL_DIGEST = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
REVISIT_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
_WARC_11_SPEC = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
OPEN_MARKER_SUFFIX = ".open"
WARC_SUFFIX = ".warc.gz"

_RECORD_END = b"\r\n\r\n"
_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_HTTP_RESPONSE = "application/http; msgtype=response"
_B32_PAIRS = [a + b for a in _B32 for b in _B32]
#: FetchResponse.truncated → WARC-Truncated (WARC 1.1 §5.13); "encoding" is absent: the
#: payload as sent is complete, only its decoding failed
_TRUNCATED = {"length": "length", "decoded": "length", "time": "time", "slow": "time",
              "disconnect": "disconnect"}
_REMEMBER_BYTES = 4096
#: recent large bodies and their digests, by id(); the body is held so the id stays its own
_RECENT_DIGESTS: dict[int, tuple[bytes, str]] = {}
#: more than the fetches in flight: between the worker's lookup and the write of the same
#: body, the other fetches of the batch digest theirs
_RECENT_LIMIT = 256


@dataclass(frozen=True, slots=True)
class WarcLocation:
    """Where a record lives: ``file`` relative to the WARC root, and the byte
    ``offset``/``length`` of its gzip member (readable alone)."""

    file: str
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class ArchivedRecord:
    """The result of one write: the location of the response (or revisit)
    record and its digests (``sha256:<BASE32>``)."""

    location: WarcLocation
    payload_digest: str
    block_digest: str


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


def _gzip_compressor(level: int) -> Any:
    """A compressor writing one gzip member (wbits 31) at ``compress_level`` ``level``."""
    if level == 0:
        return zlib.compressobj(0, zlib.DEFLATED, 31)
    return isal_zlib.compressobj((level + 2) // 3, isal_zlib.DEFLATED, 31)


def format_warc_date(timestamp: float) -> str:
    """WARC-Date for a POSIX time: UTC, microsecond precision (WARC 1.1),
    ``YYYY-MM-DDThh:mm:ss.ffffffZ`` (``isoformat`` with its ``+00:00`` as ``Z``:
    the same text as ``strftime("%Y-%m-%dT%H:%M:%S.%fZ")``, at a third of the cost)."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def _record_id() -> str:
    """``<urn:uuid:…>`` of a random (version 4) UUID, formatted without ``uuid.UUID``."""
    h = os.urandom(16).hex()
    variant = "89ab"[int(h[16], 16) & 3]
    return f"<urn:uuid:{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:]}>"


def _clean(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


def _encode(text: str) -> bytes:
    # aiohttp decodes header bytes as UTF-8 with surrogateescape: undo that exactly.
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def _fields(pairs: Iterable[tuple[str, str]]) -> str:
    pairs = list(pairs)
    text = "".join([f"{k}: {v}\r\n" for k, v in pairs])
    if text.count("\r") == text.count("\n") == len(pairs):  # no CR/LF inside: fast path
        return text
    return "".join([f"{_clean(k)}: {_clean(v)}\r\n" for k, v in pairs])


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
    status_line = f"{version} {response.status} {_clean(response.reason)}"
    return _encode(f"{status_line}\r\n{_fields(pairs)}\r\n")


def request_http_head(response: FetchResponse) -> bytes:
    """The stored HTTP request: ``GET <path> HTTP/1.1`` and the headers as sent;
    a ``Host`` header is added first when the transport did not report one."""
    parts = urlsplit(response.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = list(response.request_headers)
    if not any(k.lower() == "host" for k, _ in headers):
        headers.insert(0, ("Host", parts.netloc.rpartition("@")[2]))
    return _encode(f"GET {_clean(target)} HTTP/1.1\r\n{_fields(headers)}\r\n")


class WarcWriter:
    """Appends WARC/1.1 records to rotating ``.warc.gz`` files below ``root``.

    ``root`` is a local path or any fsspec URL. Not thread-safe: one writer per
    task/thread. Bad arguments raise :class:`ConfigError`. Every method raises
    :class:`ArchiveError` on an I/O failure;
    after such a failure the current file is abandoned (left with its ``.open``
    marker for recovery) and the next write starts a new file.
    """

    def __init__(
        self,
        root: str,
        prefix: str = "courtier",
        max_file_bytes: int = 1_000_000_000,
        software: str = "courtier/0.1",
        compress_level: int = 2,
        operator: str | None = None,
    ) -> None:
        if max_file_bytes <= 0:
            raise ConfigError(f"WARC max_file_bytes must be positive, got {max_file_bytes}")
        if not 0 <= compress_level <= 9:
            raise ConfigError(f"WARC compress_level must be 0..9, got {compress_level}")
        try:
            fs, path = fsspec.core.url_to_fs(root)
            fs.makedirs(path, exist_ok=True)
        except (OSError, ValueError) as exc:
            raise ArchiveError(f"cannot use WARC root {root!r}: {exc}") from exc
        self._fs: Any = fs
        self._root = path.rstrip("/")  # "" for the filesystem root
        self._local = isinstance(fs, LocalFileSystem)
        self._prefix = prefix
        self._max_bytes = max_file_bytes
        self._software = software
        self._level = compress_level
        self._operator = operator
        self._serial = 0
        self._file: IO[bytes] | None = None
        self._name: str | None = None
        self._size = 0
        self._warcinfo_id = ""
        self._closed = False

    @property
    def current_file(self) -> str | None:
        """Name (relative to root) of the file being written, or None if none is open."""
        return self._name

    def write_exchange(
        self, response: FetchResponse, warc_date: float | None = None
    ) -> ArchivedRecord:
        """Write a ``request`` and a ``response`` record for one fetch.

        ``warc_date`` defaults to ``response.started_at`` (or now if unset).
        Returns the location of the response record's gzip member.
        """
        self._ensure_open()
        date = format_warc_date(self._when(response, warc_date))
        uri = _clean(response.url)
        resp_id, req_id = _record_id(), _record_id()
        body = response.raw_body
        payload_digest = sha256_digest(body)
        http_head = response_http_head(response)
        block_digest = sha256_digest(http_head, body)
        fields = [
            ("WARC-Type", "response"),
            ("WARC-Record-ID", resp_id),
            ("WARC-Date", date),
            ("WARC-Target-URI", uri),
            ("WARC-Concurrent-To", req_id),
            ("WARC-Warcinfo-ID", self._warcinfo_id),
        ]
        if response.remote_ip:
            fields.append(("WARC-IP-Address", response.remote_ip))
        if response.truncated and response.truncated != "encoding":
            fields.append(("WARC-Truncated", _TRUNCATED.get(response.truncated, "unspecified")))
        fields += [("WARC-Payload-Digest", payload_digest), ("WARC-Block-Digest", block_digest)]
        resp_member = self._member(fields, _HTTP_RESPONSE, http_head, body)
        req_head = request_http_head(response)
        req_fields = [
            ("WARC-Type", "request"),
            ("WARC-Record-ID", req_id),
            ("WARC-Date", date),
            ("WARC-Target-URI", uri),
            ("WARC-Concurrent-To", resp_id),
            ("WARC-Warcinfo-ID", self._warcinfo_id),
            ("WARC-Block-Digest", sha256_digest(req_head)),
        ]
        req_member = self._member(req_fields, "application/http; msgtype=request", req_head)
        return self._commit(resp_member, req_member, payload_digest, block_digest)

    def write_revisit(
        self,
        response: FetchResponse,
        refers_to_uri: str,
        refers_to_date: float,
        refers_to_record_id: str | None,
        profile: str,
        warc_date: float | None = None,
    ) -> ArchivedRecord:
        """Write a ``revisit`` record holding the HTTP headers only (no body).

        ``profile`` is :data:`REVISIT_IDENTICAL_DIGEST` (same payload digest as
        an earlier capture; ``WARC-Payload-Digest`` is the digest of this
        response's ``raw_body``) or :data:`REVISIT_NOT_MODIFIED` (a 304).
        ``refers_to_record_id`` (``<urn:uuid:…>``) is written as
        ``WARC-Refers-To`` when known.
        """
        self._ensure_open()
        when = self._when(response, warc_date)
        http_head = response_http_head(response)
        block_digest = sha256_digest(http_head)
        payload_digest = sha256_digest(response.raw_body)
        fields = [
            ("WARC-Type", "revisit"),
            ("WARC-Record-ID", _record_id()),
            ("WARC-Date", format_warc_date(when)),
            ("WARC-Target-URI", _clean(response.url)),
            ("WARC-Profile", _clean(profile)),
            ("WARC-Refers-To-Target-URI", _clean(refers_to_uri)),
            ("WARC-Refers-To-Date", format_warc_date(refers_to_date)),
            ("WARC-Warcinfo-ID", self._warcinfo_id),
        ]
        if refers_to_record_id:
            fields.append(("WARC-Refers-To", _clean(refers_to_record_id)))
        if response.remote_ip:
            fields.append(("WARC-IP-Address", response.remote_ip))
        if profile == REVISIT_IDENTICAL_DIGEST:
            fields.append(("WARC-Payload-Digest", payload_digest))
        fields.append(("WARC-Block-Digest", block_digest))
        member = self._member(fields, _HTTP_RESPONSE, http_head)
        return self._commit(member, b"", payload_digest, block_digest)

    def flush(self) -> None:
        """Make everything written so far durable (flush + fsync on local files;
        on object stores data is durable only once the file is closed)."""
        if self._file is None:
            return
        try:
            self._file.flush()
            if self._local:
                os.fsync(self._file.fileno())
        except OSError as exc:
            name = self._abandon()
            raise ArchiveError(f"cannot flush WARC file {name}: {exc}") from exc

    def rotate(self) -> None:
        """Close the current file now (flush, fsync, marker removed); the next write
        opens a new one. Nothing happens when no file is open."""
        self._close_file()

    def close(self) -> None:
        """Flush, close the current file and remove its ``.open`` marker. Idempotent."""
        self._closed = True
        self._close_file()

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def _when(response: FetchResponse, when: float | None) -> float:
        return when if when is not None else (response.started_at or time.time())

    def _member(self, fields: list[tuple[str, str]], content_type: str, *block: bytes) -> bytes:
        """One record (header + block + CRLFCRLF) as a complete gzip member."""
        length = sum(len(part) for part in block)
        head = f"WARC/1.1\r\n{_fields(fields)}Content-Type: {content_type}\r\n"
        head += f"Content-Length: {length}\r\n\r\n"
        comp = _gzip_compressor(self._level)
        out = [comp.compress(_encode(head))]
        out.extend(comp.compress(part) for part in block)
        out.append(comp.compress(_RECORD_END))
        out.append(comp.flush())
        return b"".join(out)

    def _commit(self, main: bytes, extra: bytes, payload: str, block: str) -> ArchivedRecord:
        """Append ``main`` (the record callers locate) then ``extra``; rotate if due."""
        offset = self._append(main + extra if extra else main)
        location = WarcLocation(self._name or "", offset, len(main))
        self._maybe_rotate()
        return ArchivedRecord(location, payload, block)

    def _append(self, data: bytes) -> int:
        """Write ``data`` at the end of the open file; return the offset it starts at."""
        if self._file is None:
            raise ArchiveError("no WARC file is open (closed writer, or an earlier I/O error)")
        offset = self._size
        try:
            self._file.write(data)
        except OSError as exc:
            name = self._abandon()
            raise ArchiveError(f"cannot write WARC file {name}: {exc}") from exc
        self._size += len(data)
        return offset

    def _ensure_open(self) -> None:
        """Open a new file (with its warcinfo record) unless one is open."""
        if self._closed:
            raise ArchiveError("write to a closed WarcWriter")
        if self._file is None:
            self._open_file()

    def _maybe_rotate(self) -> None:
        if self._size >= self._max_bytes:
            self._close_file()

    def _open_file(self) -> None:
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")
        name = f"{self._prefix}-{stamp}-{self._serial:05d}-{secrets.token_hex(3)}{WARC_SUFFIX}"
        self._serial += 1
        path = f"{self._root}/{name}"
        try:
            self._fs.touch(path + OPEN_MARKER_SUFFIX)
            handle: IO[bytes] = (
                open(path, "xb") if self._local else self._fs.open(path, "wb")  # noqa: SIM115
            )
        except OSError as exc:
            raise ArchiveError(f"cannot create WARC file {path}: {exc}") from exc
        self._file, self._name, self._size = handle, name, 0
        self._warcinfo_id = _record_id()
        self._append(self._warcinfo(name))

    def _warcinfo(self, name: str) -> bytes:
        info = {"software": self._software, "format": "WARC File Format 1.1"}
        info |= {"conformsTo": _WARC_11_SPEC, "hostname": socket.gethostname(), "robots": "obey"}
        if self._operator:
            info["operator"] = self._operator
        block = _encode(_fields(info.items()))
        fields = [
            ("WARC-Type", "warcinfo"),
            ("WARC-Record-ID", self._warcinfo_id),
            ("WARC-Date", format_warc_date(time.time())),
            ("WARC-Filename", name),
            ("WARC-Block-Digest", sha256_digest(block)),
        ]
        return self._member(fields, "application/warc-fields", block)

    def _close_file(self) -> None:
        if self._file is None:
            return
        path = f"{self._root}/{self._name}"
        try:
            self.flush()
            self._file.close()
            self._fs.rm(path + OPEN_MARKER_SUFFIX)
        except OSError as exc:
            self._abandon()
            raise ArchiveError(f"cannot close WARC file {path}: {exc}") from exc
        self._file, self._name, self._size = None, None, 0

    def _abandon(self) -> str | None:
        """Drop the current file after an I/O error; its marker stays for recovery.
        Returns the dropped file's name (for the error message)."""
        name, handle = self._name, self._file
        self._file, self._name, self._size = None, None, 0
        if handle is not None:
            with contextlib.suppress(OSError):
                handle.close()
        return name
