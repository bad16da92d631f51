"""The seen filter: a Bloom filter that answers only "definitely new".

The store's unique key on ``url_key`` is the truth about whether a URL has
been seen (DESIGN.md invariant 3). This filter sits in front of the store at
intake to skip lookups for URLs that are certainly new; it never decides on
its own that a URL is a duplicate:

* ``maybe_seen(key) is False`` — the key was **never** added: it is new, and
  the caller may insert it without asking the store first;
* ``maybe_seen(key) is True`` — the key was *probably* added (or is a false
  positive at about the configured rate): the caller **must** ask the store.

Because a ``True`` answer always leads to a store lookup, adding a key that
later fails to reach the store loses nothing: the next sighting asks the
store, finds nothing and inserts it.

Keys are the 16-byte ``url_key`` values of :mod:`courtier.core.urls`; the filter
hashes them with ``xxh3_64`` (a C function handed to rbloom directly, so no
Python frame per lookup). Memory is about 1.2 bytes per expected item at 1 %
(≈12 MB for 10 million), independent of how many items are then added;
past ``expected_items`` the false-positive rate rises, but there are still
no false negatives.
"""

from __future__ import annotations

from collections.abc import Iterable

import xxhash
from rbloom import Bloom

from courtier.core.errors import ConfigError

__all__ = ["SeenFilter"]


class SeenFilter:
    """A Bloom filter over ``url_key`` values with no false negatives.

    Not thread-safe; one filter belongs to one intake loop.
    """

    __slots__ = ("_bloom", "_expected_items", "_false_positive_rate")

    def __init__(self, expected_items: int = 10_000_000, false_positive_rate: float = 0.01) -> None:
        """Size the filter for ``expected_items`` keys at ``false_positive_rate``.

        Raises :class:`~courtier.core.errors.ConfigError` when ``expected_items``
        is not positive or ``false_positive_rate`` is not strictly between
        0 and 1.
        """
        if expected_items <= 0:
            raise ConfigError(f"seen filter expected_items must be positive, got {expected_items}")
        if not 0.0 < false_positive_rate < 1.0:
            raise ConfigError(
                "seen filter false_positive_rate must be between 0 and 1 (exclusive), "
                f"got {false_positive_rate}"
            )
        self._expected_items = expected_items
        self._false_positive_rate = false_positive_rate
        self._bloom = Bloom(expected_items, false_positive_rate, xxhash.xxh3_64_intdigest)

    @property
    def expected_items(self) -> int:
        """The capacity the filter was sized for."""
        return self._expected_items

    @property
    def false_positive_rate(self) -> float:
        """The configured false-positive rate at ``expected_items`` keys."""
        return self._false_positive_rate

    @property
    def size_in_bits(self) -> int:
        """Number of bits in the filter (memory is about an eighth of this in bytes)."""
        return int(self._bloom.size_in_bits)

    @property
    def approx_items(self) -> float:
        """Estimated number of distinct keys added so far."""
        return float(self._bloom.approx_items)

    def add(self, url_key: bytes) -> None:
        """Record ``url_key``; afterwards ``maybe_seen(url_key)`` is always True."""
        self._bloom.add(url_key)

    def maybe_seen(self, url_key: bytes) -> bool:
        """False means *definitely new*; True means "ask the store".

        True is never a verdict that the URL was seen: it may be a false
        positive, so a caller must confirm it against the store's unique key.
        """
        return url_key in self._bloom

    def filter_new(self, keys: Iterable[bytes]) -> list[bytes]:
        """Return the keys that are definitely new, in input order, adding them.

        Keys answered "maybe seen" are left out; the caller must still check
        those against the store. A key repeated within ``keys`` is returned
        once (its first occurrence), since adding it makes later copies
        "maybe seen".
        """
        bloom = self._bloom
        new: list[bytes] = []
        for key in keys:
            if key not in bloom:
                bloom.add(key)
                new.append(key)
        return new

    def clear(self) -> None:
        """Forget every key (e.g. after the store was emptied)."""
        self._bloom.clear()
