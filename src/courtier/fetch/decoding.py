"""Content-Encoding undone incrementally, with a cap on what it may produce.

The transport asks for ``Accept-Encoding: gzip, deflate, br`` and decodes here, not in
aiohttp: nested codings are undone in reverse order, ``deflate`` may be zlib-wrapped or
raw, a gzip body may hold several members, and every stage emits bounded pieces, so a
decompression bomb never allocates past the cap (``max_decoded_bytes``).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any, Final

import brotli

#: largest piece a decoder emits at once (bounds memory per decoding stage)
_PIECE: Final = 64 * 1024


class _Stage:
    """One content-coding stage; ``feed`` yields decoded pieces of ≤ ``_PIECE`` bytes."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._zlib: Any = None
        self._brotli: Any = None
        self._head = b""
        if coding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "br":
            self._brotli = brotli.Decompressor()
        elif coding != "deflate":
            raise ValueError(coding)

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._brotli is not None:
            yield from self._feed_brotli(data)
            return
        if self._zlib is None:  # deflate: pick zlib-wrapped or raw from the first two bytes
            data, self._head = self._head + data, b""
            if len(data) < 2:
                self._head = data
                return
            cmf, flg = data[0], data[1]
            wrapped = cmf & 0x0F == 8 and cmf >> 4 <= 7 and ((cmf << 8) | flg) % 31 == 0
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        yield from self._feed_zlib(data)

    def _feed_zlib(self, data: bytes) -> Iterator[bytes]:
        while True:
            if self._zlib.eof:
                rest = self._zlib.unused_data + data
                if self.coding == "deflate" or rest[:1] != b"\x1f":
                    return  # bytes after the stream that start no gzip member are ignored
                self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)  # next gzip member
                data = rest
            out = self._zlib.decompress(data, _PIECE)
            data = self._zlib.unconsumed_tail
            if out:
                yield out
            if len(out) < _PIECE and not data and not self._zlib.eof:
                return

    def _feed_brotli(self, data: bytes) -> Iterator[bytes]:
        if self._brotli.is_finished():
            return
        out = self._brotli.process(data, output_buffer_limit=_PIECE)
        if out:
            yield out
        while not self._brotli.can_accept_more_data():
            out = self._brotli.process(b"", output_buffer_limit=_PIECE)
            if not out:
                return
            yield out


class DecodedCap(Exception):
    """The decoded body reached its cap (exactly ``cap`` bytes are kept)."""


class BodyDecoder:
    """Undoes a Content-Encoding list (last applied first) with a cap on output.

    ``feed`` appends to :attr:`parts`; it raises ``DecodedCap`` when the output
    would pass ``cap`` (exactly ``cap`` bytes are kept) and ``ValueError`` for
    corrupt data. The constructor raises ``ValueError`` for an unknown coding.
    """

    def __init__(self, content_encoding: str | None, cap: int) -> None:
        codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
        self.stages = [_Stage(c) for c in reversed(codings) if c and c != "identity"]
        self.cap = cap
        self.parts: list[bytes] = []
        self.size = 0

    def feed(self, data: bytes) -> None:
        try:
            for piece in self._through(data, 0):
                room = self.cap - self.size
                if len(piece) > room:
                    self.parts.append(piece[:room])
                    self.size = self.cap
                    raise DecodedCap
                self.parts.append(piece)
                self.size += len(piece)
        except (zlib.error, brotli.error) as exc:
            raise ValueError(str(exc)) from None

    def _through(self, data: bytes, index: int) -> Iterator[bytes]:
        if index == len(self.stages):
            if data:
                yield data
            return
        for piece in self.stages[index].feed(data):
            yield from self._through(piece, index + 1)
