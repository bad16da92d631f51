"""X-Robots-Tag and meta robots directives, read for noindex and nofollow."""

from __future__ import annotations

import pytest

from courtier.parse.robots_tags import directive_flags, robots_directives


@pytest.mark.parametrize(("tokens", "expected"), [
    ("", (False, False)),
    ("noindex", (True, False)),
    ("NOFOLLOW", (False, True)),
    ("noindex, nofollow", (True, True)),
    ("noindex nofollow", (True, True)),
    ("none", (True, True)),
    ("all", (False, False)),
    ("noarchive, nosnippet", (False, False)),
    ("nofollowing, noindexed", (False, False)),  # whole tokens only
])
def test_directive_flags(tokens: str, expected: tuple[bool, bool]) -> None:
    assert directive_flags(tokens) == expected


@pytest.mark.parametrize(("header", "expected"), [
    (None, (False, False)),
    ("", (False, False)),
    ("noindex", (True, False)),
    ("googlebot: nofollow", (False, False)),           # scoped to another agent
    ("courtier: nofollow", (False, True)),             # scoped to us
    ("CourTier: noindex", (True, False)),              # agent match is case-insensitive
    ("googlebot: noindex, nofollow", (False, False)),  # the scope runs to the next prefix
    ("googlebot: noindex, courtier: nofollow", (False, True)),
    ("unavailable_after: 25 Jun 2010 15:00:00 PST, nofollow", (False, True)),  # not a prefix
    ("max-snippet: 20, noindex", (True, False)),
    ("noindex\nnofollow", (True, True)),               # several headers joined by newlines
])
def test_robots_directives(header: str | None, expected: tuple[bool, bool]) -> None:
    assert robots_directives(header, "courtier") == expected


def test_another_product_token() -> None:
    assert robots_directives("otherbot: noindex", "otherbot") == (True, False)
    assert robots_directives("otherbot: noindex", "courtier") == (False, False)
