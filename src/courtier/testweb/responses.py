"""The responses of the test web's model: what one path answers (:class:`PageResponse`),
how a request target maps to the path the model serves (:func:`normalize_path`), and
the small bodies and header sets the pages use (pure: no I/O, no clock)."""

from __future__ import annotations

import hashlib
import re
import struct
import time
import zlib
from dataclasses import dataclass

UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
PCT_RE = re.compile(r"%([0-9A-Fa-f]{2})")
LAST_MODIFIED = "Mon, 01 Jan 2024 00:00:00 GMT"


@dataclass(frozen=True, slots=True)
class PageResponse:
    """What the server sends for one path: status, headers (in order) and body."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first header value named ``name`` (case-insensitive), or None."""
        lname = name.lower()
        return next((v for k, v in self.headers if k.lower() == lname), None)


def is_robots_path(path: str) -> bool:
    """True for robots files and their redirect hops (never counted as page requests)."""
    return path == "/robots.txt" or path.startswith("/robots-")


def normalize_path(path_qs: str) -> str:
    """The path the model serves for a raw request target.

    Drops query and fragment, decodes percent-encoded unreserved characters
    and resolves ``.``/``..`` segments, so every equivalent spelling maps to
    one page.
    """
    path = path_qs.split("#", 1)[0].split("?", 1)[0] or "/"

    def _decode(m: re.Match[str]) -> str:
        ch = chr(int(m.group(1), 16))
        return ch if ch in UNRESERVED else m.group(0).upper()

    path = PCT_RE.sub(_decode, path)
    out: list[str] = []
    segments = path.split("/")[1:]
    for n, seg in enumerate(segments):
        last = n == len(segments) - 1
        if seg == "..":
            if out:
                out.pop()
            if last:
                out.append("")
        elif seg == ".":
            if last:
                out.append("")
        else:
            out.append(seg)
    return "/" + "/".join(out)


def png_body(i: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixel = bytes((0, i % 256, (i * 7) % 256, (i * 13) % 256))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(pixel))
        + chunk(b"IEND", b"")
    )


def pdf_body(host: str, i: int) -> bytes:
    return (
        f"%PDF-1.4\n% courtier testweb {host} file {i}\n1 0 obj << /Type /Catalog >> endobj\n"
        "trailer << /Root 1 0 R >>\n%%EOF\n"
    ).encode()


def mp4_head(i: int) -> bytes:
    """The first box of an MP4 file (``ftyp``), numbered."""
    return b"\x00\x00\x00\x18ftypmp42" + struct.pack(">I", i) + b"mp42isom"


def padded(body: bytes, size: int) -> bytes:
    """``body`` followed by zero bytes up to ``size`` (as it is when already longer)."""
    return body + bytes(max(0, size - len(body)))


def w3c_datetime(when: float) -> str:
    """``2024-01-02T03:04:05+00:00`` (the W3C datetime form sitemaps use)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(when))


def etag_of(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=8).hexdigest() + '"'


def ok(content_type: str, body: bytes) -> PageResponse:
    headers = (
        ("Content-Type", content_type),
        ("ETag", etag_of(body)),
        ("Last-Modified", LAST_MODIFIED),
    )
    return PageResponse(200, headers, body)


def plain(status: int, body: bytes) -> PageResponse:
    return PageResponse(status, (("Content-Type", "text/plain; charset=utf-8"),), body)


def redirect(status: int, location: str) -> PageResponse:
    headers = (("Location", location), ("Content-Type", "text/plain; charset=utf-8"))
    return PageResponse(status, headers, f"moved to {location}\n".encode())
