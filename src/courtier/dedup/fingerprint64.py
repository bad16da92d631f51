"""64-bit fingerprints as integers: distance, and the signed form SQL columns hold.

Kept apart from :mod:`courtier.dedup.simhash` (which needs numpy) so that the
store and the query commands load without numpy.
"""

from __future__ import annotations

MASK64 = (1 << 64) - 1
_SIGN_BIT = 1 << 63


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two fingerprints (given as unsigned or signed)."""
    return ((a ^ b) & MASK64).bit_count()


def to_signed64(value: int) -> int:
    """Map an unsigned 64-bit fingerprint to the signed range SQL integers hold.

    Raises :class:`ValueError` when ``value`` is outside ``0 … 2**64 - 1``.
    """
    if not 0 <= value <= MASK64:
        raise ValueError(f"not an unsigned 64-bit value: {value}")
    return value - (1 << 64) if value & _SIGN_BIT else value


def from_signed64(value: int) -> int:
    """Inverse of :func:`to_signed64`: a stored signed 64-bit value back to unsigned.

    Raises :class:`ValueError` when ``value`` is outside ``-2**63 … 2**63 - 1``.
    """
    if not -_SIGN_BIT <= value < _SIGN_BIT:
        raise ValueError(f"not a signed 64-bit value: {value}")
    return value & MASK64
