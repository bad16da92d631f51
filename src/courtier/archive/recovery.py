"""The reading side of the archive: crash recovery and record-level checks.

:func:`recover_warc_dir` repairs what a crash can leave behind. The writer
(:mod:`courtier.archive.warc`) writes each record as one gzip member and keeps
a ``<name>.open`` marker beside a file until it closes it cleanly, so a crash
(kill -9, power loss) can damage only the tail of a marked file. Recovery
walks the chain of gzip members of such a file; a member counts as complete
when it decompresses with a valid CRC and holds exactly one WARC record
(``WARC/1.x`` header, ``Content-Length`` bytes of block, CRLF CRLF). Bytes
after the last complete member are cut off, a file left with no record is
removed, and the marker is deleted.

Recovery never damages a good file: a file whose members are all complete is
left as it is, and when a damaged member is followed by a complete one (damage
in the middle, not a crash tail) nothing is cut and the file is reported as
``corrupt`` for a human to look at. Run recovery before writers start.

:func:`check_warc` reads any WARC (plain, gzip per record, or one gzip stream)
and reports what ``warcio check`` reports (block and payload digest mismatch)
plus what it misses: a missing or duplicate ``WARC-Record-ID``, missing
mandatory fields, a truncated last record, bad framing, and an HTTP
``Content-Length`` that disagrees with the stored payload.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import re
import zlib
from dataclasses import dataclass, field
from typing import IO, Any

from courtier.archive.local_disk import file_system, is_local
from courtier.archive.warc import OPEN_MARKER_SUFFIX, WARC_SUFFIX
from courtier.core.errors import ArchiveError

_CHUNK = 1 << 20
_OUT_CAP = 4 << 20
_HEAD_CAP = 64 << 10
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)[ \t]*\r\n", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What recovery found in one file (``file`` is relative to the root).

    ``action``: ``ok`` (untouched), ``truncated`` (cut to ``new_size``),
    ``removed`` (no complete record; file deleted) or ``corrupt`` (damage
    before good data; left untouched). ``records_kept`` counts complete members.
    """

    file: str
    old_size: int
    new_size: int
    records_kept: int
    action: str
    detail: str = ""


@dataclass(slots=True)
class _Scan:
    good_end: int = 0
    members: int = 0
    problem: str | None = None


def _record_complete(head: bytes, out_len: int, tail: bytes) -> bool:
    """True when a member's decompressed bytes are exactly one WARC record."""
    end = head.find(b"\r\n\r\n")
    if not head.startswith(b"WARC/1.") or end < 0 or tail != b"\r\n\r\n":
        return False
    match = _CONTENT_LENGTH.search(head, 0, end + 2)
    return match is not None and out_len == end + 4 + int(match.group(1)) + 4


def scan_members(stream: IO[bytes], start: int = 0) -> _Scan:
    """Walk the gzip members of ``stream`` from its current position (file offset
    ``start``) up to the first incomplete or damaged one."""
    scan = _Scan(good_end=start)
    read_end = start
    dec = zlib.decompressobj(31)
    head, out_len, tail = b"", 0, b""
    data = b""
    while True:
        if not data:
            data = stream.read(_CHUNK)
            read_end += len(data)
            if not data:
                break
        try:
            out = dec.decompress(data, _OUT_CAP)
        except zlib.error as exc:
            scan.problem = f"damaged gzip member at offset {scan.good_end}: {exc}"
            return scan
        if out:
            if len(head) < _HEAD_CAP:
                head += out[: _HEAD_CAP - len(head)]
            out_len += len(out)
            tail = (tail + out[-4:])[-4:]
        if dec.eof:
            member_end = read_end - len(dec.unused_data)
            if not _record_complete(head, out_len, tail):
                scan.problem = f"gzip member at offset {scan.good_end} is not one WARC record"
                return scan
            scan.members += 1
            scan.good_end = member_end
            data = dec.unused_data
            dec = zlib.decompressobj(31)
            head, out_len, tail = b"", 0, b""
        else:
            data = dec.unconsumed_tail
    if read_end > scan.good_end:
        scan.problem = f"incomplete gzip member at offset {scan.good_end} (file ends)"
    return scan


def _later_member_exists(fs: Any, path: str, after: int) -> bool:
    """True if a complete WARC gzip member starts somewhere after offset ``after``."""
    with fs.open(path, "rb") as stream:
        stream.seek(after + 1)
        pos, carry = after + 1, b""
        while chunk := stream.read(_CHUNK):
            window = carry + chunk
            base = pos - len(carry)
            hit = window.find(b"\x1f\x8b\x08")
            while hit >= 0:
                with fs.open(path, "rb") as probe:
                    probe.seek(base + hit)
                    if scan_members(probe, base + hit).members > 0:
                        return True
                hit = window.find(b"\x1f\x8b\x08", hit + 1)
            pos += len(chunk)
            carry = window[-2:]
    return False


def _cut(fs: Any, path: str, size: int) -> None:
    if is_local(fs):
        with open(path, "r+b") as handle:
            handle.truncate(size)
            handle.flush()
            os.fsync(handle.fileno())
        return
    tmp = path + ".recovering"
    with fs.open(path, "rb") as src, fs.open(tmp, "wb") as dst:
        left = size
        while left > 0 and (chunk := src.read(min(_CHUNK, left))):
            dst.write(chunk)
            left -= len(chunk)
    fs.mv(tmp, path)


def recover_file(fs: Any, path: str, rel: str) -> RecoveryReport:
    """Check one ``.warc.gz`` file and cut a damaged tail (see module docstring)."""
    old_size = int(fs.size(path))
    with fs.open(path, "rb") as stream:
        scan = scan_members(stream)
    if scan.problem is None and scan.members > 0:
        return RecoveryReport(rel, old_size, old_size, scan.members, "ok")
    if scan.problem is None:
        fs.rm(path)
        return RecoveryReport(rel, old_size, 0, 0, "removed", "no WARC record in the file")
    damaged = scan.problem.startswith("damaged") or "not one WARC" in scan.problem
    if damaged and _later_member_exists(fs, path, scan.good_end):
        return RecoveryReport(rel, old_size, old_size, scan.members, "corrupt", scan.problem)
    if scan.members == 0:
        fs.rm(path)
        return RecoveryReport(rel, old_size, 0, 0, "removed", scan.problem)
    _cut(fs, path, scan.good_end)
    return RecoveryReport(rel, old_size, scan.good_end, scan.members, "truncated", scan.problem)


def recover_warc_dir(root: str, full: bool = False) -> list[RecoveryReport]:
    """Repair crash damage in the ``*.warc.gz`` files below ``root`` (recursive).

    With ``full=False`` only files with a ``.open`` marker (not closed cleanly)
    are scanned; ``full=True`` scans every file. Markers of scanned files are
    removed. Returns one report per scanned file, sorted by name. Raises
    :class:`ArchiveError` when the directory cannot be listed or a file cannot
    be read or repaired.
    """
    try:
        fs, base = file_system(root)
        base = base.rstrip("/")
        if not fs.exists(base):
            return []
        names = sorted(fs.find(base))
        present = set(names)
        markers = [n for n in names if n.endswith(WARC_SUFFIX + OPEN_MARKER_SUFFIX)]
        if full:
            targets = [n for n in names if n.endswith(WARC_SUFFIX)]
        else:
            targets = [m[: -len(OPEN_MARKER_SUFFIX)] for m in markers]
        reports = []
        for path in targets:
            rel = path[len(base) + 1 :]
            if path in present:
                reports.append(recover_file(fs, path, rel))
            else:  # crashed between creating the marker and the file
                reports.append(RecoveryReport(rel, 0, 0, 0, "removed", "file never created"))
        for marker in markers:
            if full or marker[: -len(OPEN_MARKER_SUFFIX)] in targets:
                fs.rm(marker)
        return reports
    except (OSError, ValueError) as exc:
        raise ArchiveError(f"cannot recover WARC files under {root!r}: {exc}") from exc


# -- record-level checks ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckReport:
    """Result of :func:`check_warc`: records read and problems found (empty = good)."""

    file: str
    records: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _digest_matches(spec: str, data: bytes) -> bool | None:
    """Compare a ``algo:value`` digest (base32, hex or base64) with ``data``;
    None when the algorithm is unknown or the value cannot be decoded."""
    algo, _, value = spec.strip().partition(":")
    try:
        actual = hashlib.new(algo.lower().replace("-", ""), data).digest()
    except ValueError:
        return None
    value = value.strip().rstrip("=")
    encodings = (
        base64.b32encode(actual).decode().rstrip("="),
        actual.hex(),
        base64.b64encode(actual).decode().rstrip("="),
        base64.urlsafe_b64encode(actual).decode().rstrip("="),
    )
    return value in encodings or value.upper() == encodings[0] or value.lower() == encodings[1]


def _dechunk(data: bytes) -> bytes | None:
    out, pos = bytearray(), 0
    while True:
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            return None
        try:
            size = int(data[pos:eol].split(b";")[0], 16)
        except ValueError:
            return None
        if size == 0:
            return bytes(out)
        out += data[eol + 2 : eol + 2 + size]
        pos = eol + 4 + size


def _check_payload(fields: dict[str, str], block: bytes, where: str, problems: list[str]) -> None:
    is_http = fields.get("content-type", "").lower().startswith("application/http")
    sep = block.find(b"\r\n\r\n") if is_http else -1
    http_head = block[: sep + 2].lower() if sep >= 0 else b""
    payload = block[sep + 4 :] if sep >= 0 else block
    chunked = b"\r\ntransfer-encoding: chunked" in http_head
    spec = fields.get("warc-payload-digest")
    if spec and fields.get("warc-type") != "revisit":
        result = _digest_matches(spec, payload)
        if result is False and chunked:  # WARC 1.1 hashes the de-chunked entity; some hash raw
            plain = _dechunk(payload)
            result = plain is not None and _digest_matches(spec, plain)
        if result is None:
            problems.append(f"{where}: unknown payload digest {spec}")
        elif result is False:
            problems.append(f"{where}: payload digest mismatch ({spec})")
    declared = _CONTENT_LENGTH.search(http_head) if http_head.startswith(b"http/") else None
    if declared and not chunked and "warc-truncated" not in fields:  # noqa: SIM102
        if fields.get("warc-type") == "response" and int(declared.group(1)) != len(payload):
            problems.append(
                f"{where}: HTTP Content-Length {int(declared.group(1))} "
                f"but the payload has {len(payload)} bytes"
            )


def check_warc(path: str) -> CheckReport:
    """Read every record of the WARC at ``path`` (local path or fsspec URL) and
    check framing, mandatory fields, unique record ids, digests and HTTP
    Content-Length. Never raises for a damaged file: damage is a problem in
    the report. Raises :class:`ArchiveError` only when the file cannot be opened."""
    problems: list[str] = []
    seen: set[str] = set()
    records = 0
    import fsspec  # any URL: a command of its own, never a crawl's start-up

    try:
        raw = fsspec.open(path, "rb").open()
    except (OSError, ValueError) as exc:
        raise ArchiveError(f"cannot open WARC {path!r}: {exc}") from exc
    with raw:
        is_gzip = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        stream: Any = gzip.GzipFile(fileobj=raw) if is_gzip else raw
        try:
            while line := stream.readline():
                where = f"record {records + 1}"
                if not line.startswith(b"WARC/1."):
                    problems.append(f"{where}: does not start with a WARC/1.x line")
                    break
                fields: dict[str, str] = {}
                while (line := stream.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = line.decode("utf-8", "replace").partition(":")
                    fields.setdefault(name.strip().lower(), value.strip())
                if not line:
                    problems.append(f"{where}: truncated header")
                    break
                records += 1
                rid = fields.get("warc-record-id", "")
                where += f" {rid}" if rid else ""
                for name in ("warc-record-id", "warc-type", "warc-date", "content-length"):
                    if name not in fields:
                        problems.append(f"{where}: missing {name}")
                if rid in seen:
                    problems.append(f"{where}: duplicate WARC-Record-ID")
                seen.add(rid)
                length = int(fields.get("content-length", "0") or "0")
                block = stream.read(length)
                if len(block) < length:
                    problems.append(f"{where}: truncated block ({len(block)} of {length} bytes)")
                    break
                if stream.read(4) != b"\r\n\r\n":
                    problems.append(f"{where}: block not followed by CRLF CRLF")
                    break
                spec = fields.get("warc-block-digest")
                if spec and (result := _digest_matches(spec, block)) is not True:
                    kind = "unknown" if result is None else "mismatch of"
                    problems.append(f"{where}: {kind} block digest {spec}")
                _check_payload(fields, block, where, problems)
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            problems.append(f"after record {records}: unreadable ({exc})")
    return CheckReport(path, records, problems)
