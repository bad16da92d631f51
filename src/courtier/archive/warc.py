"""WARC/1.1 writer: one gzip member per record, local or fsspec output, rotation.

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

import asyncio
import contextlib
import os
import secrets
import socket
import time
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any, NoReturn

from isal import isal_zlib

from courtier.archive.local_disk import file_system, is_local
from courtier.archive.warc_fields import (
    clean_field,
    encode_head,
    field_lines,
    format_warc_date,
    record_id,
    request_http_head,
    response_http_head,
    sha256_digest,
)
from courtier.core.errors import ArchiveError, ConfigError
from courtier.fetch.transport import FetchResponse

REVISIT_IDENTICAL_DIGEST = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
REVISIT_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
_WARC_11_SPEC = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
OPEN_MARKER_SUFFIX = ".open"
WARC_SUFFIX = ".warc.gz"

_RECORD_END = b"\r\n\r\n"
_HTTP_RESPONSE = "application/http; msgtype=response"
#: FetchResponse.truncated → WARC-Truncated (WARC 1.1 §5.13); "encoding" is absent: the
#: payload as sent is complete, only its decoding failed
_TRUNCATED = {"length": "length", "decoded": "length", "time": "time", "slow": "time",
              "disconnect": "disconnect"}


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


def _gzip_compressor(level: int) -> Any:
    """A compressor writing one gzip member (wbits 31) at ``compress_level`` ``level``."""
    if level == 0:
        return zlib.compressobj(0, zlib.DEFLATED, 31)
    return isal_zlib.compressobj((level + 2) // 3, isal_zlib.DEFLATED, 31)


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
            fs, path = file_system(root)
            fs.makedirs(path, exist_ok=True)
        except (OSError, ValueError) as exc:
            raise ArchiveError(f"cannot use WARC root {root!r}: {exc}") from exc
        self._fs: Any = fs
        self._root = path.rstrip("/")  # "" for the filesystem root
        self._local = is_local(fs)
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
        uri = clean_field(response.url)
        resp_id, req_id = record_id(), record_id()
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
            ("WARC-Record-ID", record_id()),
            ("WARC-Date", format_warc_date(when)),
            ("WARC-Target-URI", clean_field(response.url)),
            ("WARC-Profile", clean_field(profile)),
            ("WARC-Refers-To-Target-URI", clean_field(refers_to_uri)),
            ("WARC-Refers-To-Date", format_warc_date(refers_to_date)),
            ("WARC-Warcinfo-ID", self._warcinfo_id),
        ]
        if refers_to_record_id:
            fields.append(("WARC-Refers-To", clean_field(refers_to_record_id)))
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
        handle, name = self._file, self._name
        duplicate = self._to_os()
        if duplicate is None:
            return
        try:
            _sync_and_close(duplicate)
        except OSError as exc:
            self._sync_failed(handle, name, exc)

    async def flush_off_loop(self) -> None:
        """:meth:`flush` without holding up the event loop on the disk: what is buffered
        goes to the OS at once, and the fsync runs in a thread, on a duplicate of the
        file's descriptor that the thread closes (a write, a rotation or a close meanwhile
        leaves it alone; it makes durable at least what was written before this call).
        A fsync of a busy disk can take hundreds of milliseconds, and on the loop it
        stalled the fetches and the coordinator's lease renewals with it."""
        handle, name = self._file, self._name
        duplicate = self._to_os()
        if duplicate is None:
            return
        try:
            await asyncio.to_thread(_sync_and_close, duplicate)
        except OSError as exc:
            self._sync_failed(handle, name, exc)

    def _to_os(self) -> int | None:
        """Write the buffer to the OS; a duplicate of the file's descriptor to fsync, or
        None when there is nothing to sync (no file open, or an object store's file)."""
        if self._file is None:
            return None
        try:
            self._file.flush()
            return os.dup(self._file.fileno()) if self._local else None
        except OSError as exc:
            name = self._abandon()
            raise ArchiveError(f"cannot flush WARC file {name}: {exc}") from exc

    def _sync_failed(self, handle: IO[bytes] | None, name: str | None,
                     exc: OSError) -> NoReturn:
        """A failed fsync abandons the file it was for, if it is still the current one."""
        if self._file is handle:
            self._abandon()
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
        head = f"WARC/1.1\r\n{field_lines(fields)}Content-Type: {content_type}\r\n"
        head += f"Content-Length: {length}\r\n\r\n"
        comp = _gzip_compressor(self._level)
        out = [comp.compress(encode_head(head))]
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
        self._warcinfo_id = record_id()
        self._append(self._warcinfo(name))

    def _warcinfo(self, name: str) -> bytes:
        info = {"software": self._software, "format": "WARC File Format 1.1"}
        info |= {"conformsTo": _WARC_11_SPEC, "hostname": socket.gethostname(), "robots": "obey"}
        if self._operator:
            info["operator"] = self._operator
        block = encode_head(field_lines(info.items()))
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


def _sync_and_close(descriptor: int) -> None:
    """fsync a descriptor of its own, then close it (in the thread, so a cancelled
    caller never closes it under a running fsync)."""
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
