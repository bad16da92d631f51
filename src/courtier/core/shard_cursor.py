"""The outbox's per-shard cursor: for each shard, the last per-shard position read.

Every event carries ``(shard, shard_pos)``: ``shard_pos`` numbers one shard's events in
commit order, taken from a per-shard counter inside the writing transaction
(docs/scale-out.md, "The outbox cursor"). A reader keeps a :class:`ShardCursor` and asks
:meth:`Store.read_events_by_shard` for the events above it; a shard missing from the
cursor is read from its first event.

The token form (:meth:`ShardCursor.token`, :meth:`ShardCursor.from_token`) is what the
HTTP API and the CLI hand out and take back: ``c1.`` (the form's version) followed by
the URL-safe base64 (no padding) of the zlib-compressed varints ``shard - previous
shard, position`` of each shard in ascending order. It survives a URL query string and
a shell unquoted; 1,024 shards near a million events each fit in about 3 KB.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import NamedTuple

from courtier.core.errors import ConfigError
from courtier.core.records import Event

__all__ = ["TOKEN_PREFIX", "ShardCursor", "ShardPage"]

#: the token form's version prefix
TOKEN_PREFIX = "c1."
#: the longest token accepted (a bound on the decoder's work)
MAX_TOKEN = 1 << 20


class ShardCursor(Mapping[int, int]):
    """An immutable mapping shard → last position read (positions start at 1; a shard
    absent reads from its first event)."""

    __slots__ = ("_positions",)

    def __init__(self, positions: Mapping[int, int] | Iterable[tuple[int, int]] = ()) -> None:
        items = dict(positions)
        for shard, position in items.items():
            if shard < 0 or position < 0:
                raise ValueError(f"shard cursor: negative shard or position {shard}:{position}")
        self._positions = {s: p for s, p in sorted(items.items()) if p > 0}

    def __getitem__(self, shard: int) -> int:
        return self._positions[shard]

    def __iter__(self) -> Iterator[int]:
        return iter(self._positions)

    def __len__(self) -> int:
        return len(self._positions)

    def __repr__(self) -> str:
        return f"ShardCursor({self._positions!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ShardCursor):
            return self._positions == other._positions
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._positions.items()))

    def position(self, shard: int) -> int:
        """The last position read of ``shard`` (0: none)."""
        return self._positions.get(shard, 0)

    def advanced(self, positions: Mapping[int, int]) -> ShardCursor:
        """This cursor with each shard of ``positions`` moved forward to it (never back)."""
        merged = dict(self._positions)
        for shard, position in positions.items():
            merged[shard] = max(merged.get(shard, 0), position)
        return ShardCursor(merged)

    def covers(self, other: Mapping[int, int]) -> bool:
        """True when every shard of ``other`` is read at least as far here."""
        return all(self.position(s) >= p for s, p in other.items())

    def token(self) -> str:
        """The compact text form (see the module's docstring)."""
        raw = bytearray()
        previous = 0
        for shard, position in self._positions.items():
            _varint(raw, shard - previous)
            _varint(raw, position)
            previous = shard
        packed = base64.urlsafe_b64encode(zlib.compress(bytes(raw), 9)).rstrip(b"=")
        return TOKEN_PREFIX + packed.decode("ascii")

    @classmethod
    def from_token(cls, token: str) -> ShardCursor:
        """The cursor of a :meth:`token`; ConfigError naming the problem otherwise."""
        text = token.strip()
        if not text.startswith(TOKEN_PREFIX):
            raise ConfigError(
                f"not an outbox cursor token: {token[:40]!r} (a token starts with "
                f"{TOKEN_PREFIX!r}; take it from the 'cursor' of an events answer)")
        if len(text) > MAX_TOKEN:
            raise ConfigError(f"outbox cursor token longer than {MAX_TOKEN} characters")
        body = text[len(TOKEN_PREFIX):]
        try:
            raw = zlib.decompress(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            numbers = list(_varints(raw))
        except (binascii.Error, zlib.error, ValueError) as exc:
            raise ConfigError(f"damaged outbox cursor token {token[:40]!r}: {exc}") from exc
        if len(numbers) % 2:
            raise ConfigError(f"damaged outbox cursor token {token[:40]!r}: odd length")
        positions: dict[int, int] = {}
        shard = 0
        for delta, position in zip(numbers[::2], numbers[1::2], strict=True):
            shard += delta
            positions[shard] = position
        return cls(positions)


def _varint(out: bytearray, value: int) -> None:
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _varints(raw: bytes) -> Iterator[int]:
    value = shift = 0
    for byte in raw:
        value |= (byte & 0x7F) << shift
        shift += 7
        if shift > 70:
            raise ValueError("varint too long")
        if not byte & 0x80:
            yield value
            value = shift = 0
    if shift:
        raise ValueError("truncated varint")


class ShardPage(NamedTuple):
    """One answer of ``Store.read_events_by_shard``: the events (ordered by shard, then
    position) and the cursor to read on from."""

    events: list[Event]
    cursor: ShardCursor
