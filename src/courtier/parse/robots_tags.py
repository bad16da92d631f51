"""Robots directives of a page, apart from robots.txt: the ``X-Robots-Tag`` header and
the content of ``<meta name=robots>`` tags, read for ``noindex`` and ``nofollow``
(``none`` is both). A header may scope segments to one agent (``"googlebot: noindex"``);
only unscoped segments and those of our own product token count.
"""

from __future__ import annotations

import re

#: directives whose own syntax has a colon, so they are not "agent:" prefixes
_COLON_DIRECTIVES = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)
_TOKEN_SPLIT = re.compile(r"[,\s]+")
_AGENT_PREFIX = re.compile(r"\s*([A-Za-z0-9_.\-]+)\s*:(.*)", re.DOTALL)


def directive_flags(tokens: str) -> tuple[bool, bool]:
    """(noindex, nofollow) from a comma/space separated directive list."""
    noindex = nofollow = False
    for token in _TOKEN_SPLIT.split(tokens.lower()):
        if token == "noindex":
            noindex = True
        elif token == "nofollow":
            nofollow = True
        elif token == "none":
            noindex = nofollow = True
    return noindex, nofollow


def robots_directives(header: str | None, agent_token: str = "courtier") -> tuple[bool, bool]:
    """(noindex, nofollow) from an ``X-Robots-Tag`` value (several may be comma-joined).

    A segment ``"agent: directives"`` scopes it and the following segments to
    that agent until the next prefix; unprefixed segments apply to everyone.
    Only unscoped segments and those scoped to ``agent_token`` (case-insensitive)
    count. ``unavailable_after: …`` and ``max-…: …`` are directives, not prefixes.
    """
    if not header:
        return False, False
    me = agent_token.lower()
    scope: str | None = None
    noindex = nofollow = False
    for segment in re.split(r"[,\n]", header):
        m = _AGENT_PREFIX.match(segment)
        if m is not None and m.group(1).lower() not in _COLON_DIRECTIVES:
            scope = m.group(1).lower()
            segment = m.group(2)
        if scope is None or scope == me:
            ni, nf = directive_flags(segment)
            noindex |= ni
            nofollow |= nf
    return noindex, nofollow
