"""A sitemap body as a byte stream for the XML parser (:mod:`courtier.parse.sitemaps`):
gzip inflated piece by piece across every member, at most ``max_bytes`` of output, so
a decompression bomb stops at the cap and memory stays at one piece. Problems go to
the caller's result as error lines; reaching the cap marks it truncated.

A plain body is read by position: each read copies only the piece it returns. (Until
2026-12-06 each read also copied the whole rest of the body, so reading a 50 MiB
sitemap in the XML parser's 16 KiB reads copied ~40 GB, about 50 s on the 2-core
machine: past the 10 s parse budget, so a large plain sitemap was cut by time.)"""

from __future__ import annotations

import zlib
from typing import Protocol

GZIP_MAGIC = b"\x1f\x8b"
_PIECE = 64 * 1024  # bytes inflated at a time


class Problems(Protocol):
    """Where the source reports (a :class:`~courtier.parse.sitemaps.SitemapResult`)."""

    def cut(self, reason: str) -> None: ...

    def error(self, message: str) -> None: ...


class SitemapSource:
    """The body as a stream for the XML parser: gzip inflated piece by piece (all
    members), at most ``max_bytes`` of output, so memory stays at one piece."""

    def __init__(self, body: bytes, max_bytes: int, result: Problems) -> None:
        self.result, self.room = result, max_bytes
        self.max_bytes = max_bytes
        self.gzipped = body.startswith(GZIP_MAGIC)
        self._tail = body  # input not yet inflated (gzip), or the whole body (plain)
        self._at = 0  # plain: where the next read starts in the body
        self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if self.gzipped else None
        self._buffer = b""  # peeked output
        self._done = False

    def _next(self, size: int) -> bytes:
        if self._done:
            return b""
        if self._inflater is None:
            piece = self._tail[self._at:self._at + size]
            self._at += len(piece)
            return piece
        while True:
            if self._inflater.eof:
                rest = self._inflater.unused_data
                if not rest.startswith(GZIP_MAGIC):
                    self._done = True  # the end, or trailing garbage after the last member
                    return b""
                self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                self._tail = rest
            try:
                out = self._inflater.decompress(self._tail, size)
            except zlib.error as exc:
                self.result.error(f"gzip: {exc}")
                self._done = True
                return b""
            self._tail = self._inflater.unconsumed_tail
            if out:
                return out
            if not self._tail and not self._inflater.eof:
                self.result.error("gzip: truncated stream")
                self._done = True
                return b""

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that is left for a negative size)."""
        want = self.max_bytes + 1 if size < 0 else max(1, size)
        head, self._buffer = self._buffer[:want], self._buffer[want:]
        pieces, got = [head], len(head)
        while got < want:
            piece = self._next(min(_PIECE, want - got))
            if not piece:
                break
            pieces.append(piece)
            got += len(piece)
            if size >= 0:
                break  # a short read is fine for a stream
        data = b"".join(pieces)
        if len(data) > self.room:
            data = data[: self.room]
            self._cut()
        self.room -= len(data)
        return data

    def peek(self, size: int) -> bytes:
        """The next ``size`` bytes (fewer at the end), left unread."""
        while len(self._buffer) < size:
            piece = self._next(size - len(self._buffer))
            if not piece:
                break
            self._buffer += piece
        return self._buffer[:size]

    def skip(self, size: int) -> None:
        self.peek(size)
        self._buffer = self._buffer[size:]
        self.room -= size

    def _cut(self) -> None:
        what = "decompressed sitemap" if self.gzipped else "sitemap"
        self.result.cut(f"{what} exceeds {self.max_bytes} bytes")
        self._done = True
        self._buffer = b""
