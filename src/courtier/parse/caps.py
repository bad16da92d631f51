"""Caps on every string taken from a fetched page or its headers before it is stored
in a URL row or emitted in an event (a 1 MB ``<title>`` once became a 1 MB event).

Text is cut (whitespace collapsed first for titles); values that would be wrong
when cut — a validator sent back in a conditional request, a URL — are dropped
instead. URLs are bounded elsewhere: every link, redirect target and sitemap
``loc`` is canonicalized, and a canonical URL over
:data:`courtier.core.urls.MAX_URL_LENGTH` (2048) characters is refused.
"""

from __future__ import annotations

from courtier.core.urls import MAX_URL_LENGTH

#: characters of a page title kept (after collapsing whitespace)
MAX_TITLE_CHARS = 512
#: characters of a header value kept in a row or event (Content-Type)
MAX_HEADER_CHARS = 256
#: an ETag or Last-Modified longer than this is not kept (cut, it would never match)
MAX_VALIDATOR_CHARS = 256
#: a ``<link rel=canonical>`` longer than this is not reported
MAX_CANONICAL_CHARS = MAX_URL_LENGTH


def cap_text(value: str | None, limit: int) -> str | None:
    """``value`` cut to ``limit`` characters (None stays None)."""
    if value is None or len(value) <= limit:
        return value
    return value[:limit]


def whole_or_none(value: str | None, limit: int) -> str | None:
    """``value`` when it fits in ``limit`` characters, else None."""
    if value is None or len(value) > limit:
        return None
    return value
