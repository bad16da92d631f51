"""robots.txt (RFC 9309): parse once, answer "may this agent fetch this path?" fast.

Parsing contract (:meth:`RobotsTxt.parse` never raises, whatever the bytes):

* At most :data:`MAX_ROBOTS_BYTES` octets are read; the rest is ignored.
* A UTF-8 byte-order mark (or a leading part of one) is skipped; a UTF-16
  BOM makes the body decoded as UTF-16 (RFC 9309 asks for UTF-8, but such
  files exist and their authors mean their rules).
* Lines end at CR, LF or CRLF; ``#`` starts a comment; a line without ``:``
  is ignored; keys are case-insensitive and may carry whitespace around them.
* A group is one or more ``user-agent`` lines followed by ``allow`` /
  ``disallow`` lines. Only a ``user-agent`` line that follows a rule starts a
  new group: ``crawl-delay``, ``sitemap``, unknown keys and blank lines never
  end a group. Rules before the first ``user-agent`` line belong to no group.
* A ``user-agent`` value is reduced to its product token (its leading run of
  ``A-Z a-z _ -``, matched case-insensitively); ``*`` names the global group.
* An empty ``allow`` / ``disallow`` value is no rule. A pattern that starts
  with neither ``/`` nor ``*`` gets a leading ``/``.
* ``crawl-delay`` (non-negative, finite seconds; anything else ignored)
  belongs to its group. ``sitemap`` lines are global, kept in order, without
  duplicates, exactly as written (callers resolve relative ones against the
  robots.txt URL).
* A few common misspellings of keys are accepted (``useragent``,
  ``dissallow``, ``crawldelay``…); each only ever makes the file stricter or
  keeps a group together as its author meant.

Matching contract (:meth:`RobotsTxt.allowed`): all groups naming the agent's
product token are merged; if there are none, all ``*`` groups are merged; if
there are none either, everything is allowed. Within the merged rules the
longest pattern (in octets, after percent-normalisation, see
:mod:`courtier.politeness.robots_match`) wins, ``Allow`` wins a tie, ``*``
matches any run of characters, a final ``$`` anchors the end. ``/robots.txt``
is always allowed.
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from courtier.politeness.robots_match import (
    PATH_NEEDS_FIX,
    PathCheck,
    Rule,
    RuleSet,
    normalize,
    normalize_bytes,
)

__all__ = [
    "MAX_ROBOTS_BYTES",
    "RobotsGroup",
    "RobotsTxt",
    "product_token",
    "request_path",
]

#: octets of a robots.txt body that are parsed; callers cap the download to this too
MAX_ROBOTS_BYTES: Final = 512 * 1024

_UA, _ALLOW, _DISALLOW, _DELAY, _SITEMAP = range(5)
_KEYS: Final[dict[bytes, int]] = {
    b"user-agent": _UA,
    b"useragent": _UA,
    b"user agent": _UA,
    b"allow": _ALLOW,
    b"disallow": _DISALLOW,
    b"dissallow": _DISALLOW,
    b"dissalow": _DISALLOW,
    b"disalow": _DISALLOW,
    b"diasllow": _DISALLOW,
    b"disallaw": _DISALLOW,
    b"desallow": _DISALLOW,
    b"crawl-delay": _DELAY,
    b"crawldelay": _DELAY,
    b"crawl delay": _DELAY,
    b"sitemap": _SITEMAP,
    b"site-map": _SITEMAP,
}
_UTF8_BOM: Final = b"\xef\xbb\xbf"
_PRODUCT_BYTES = re.compile(rb"[A-Za-z_-]*")
_PRODUCT_STR = re.compile(r"[A-Za-z_-]*")
_ROBOTS_PATH: Final = "/robots.txt"
_ROBOTS_QUERY: Final = _ROBOTS_PATH + "?"
_DECIMAL = re.compile(rb"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


def product_token(user_agent: str) -> str:
    """The lower-cased product token of a User-Agent string (``"Bot/1.0 (+url)"`` → ``"bot"``).

    It is the leading run of ``A-Z a-z _ -``; it is empty when the string does
    not start with one of those characters.
    """
    match = _PRODUCT_STR.match(user_agent)
    return match.group(0).lower() if match else ""


def request_path(url: str) -> str:
    """The part of a URL that robots rules match: path plus ``?query``, no fragment.

    ``"http://h/a/b?c=d#e"`` → ``"/a/b?c=d"``; an empty path is ``"/"``. Without
    ``scheme://`` (or ``//``) the string is read as ``host/path`` (``"a/b"`` →
    ``"/b"``), except that a leading ``/`` starts the path. Never raises.
    """
    first_stop = _first_of(url, "/?;", 0)
    scheme = url.find("://")
    if scheme >= 0 and (first_stop < 0 or scheme <= first_stop):
        authority = scheme + 3
    elif url.startswith("//"):
        authority = 2
    else:
        authority = 0
    start = _first_of(url, "/?;", authority)
    if start < 0:
        return "/"
    end = url.find("#", authority)
    if 0 <= end < start:
        return "/"
    path = url[start:] if end < 0 else url[start:end]
    return path if path.startswith("/") else "/" + path


def _first_of(text: str, chars: str, start: int) -> int:
    """Index of the first of ``chars`` in ``text[start:]``, or -1."""
    best = -1
    for char in chars:
        found = text.find(char, start)
        if found >= 0 and (best < 0 or found < best):
            best = found
    return best


@dataclass(frozen=True, slots=True)
class RobotsGroup:
    """The merged group that applies to one product token: its rules and crawl delay."""

    rules: RuleSet
    crawl_delay: float | None


@dataclass(slots=True)
class _GroupBuilder:
    agents: list[str] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    has_rules: bool = False
    crawl_delay: float | None = None


def _agent_of(value: bytes) -> str:
    """``"*"`` for the global group, else the product token (maybe empty, matching nothing)."""
    if value[:1] == b"*" and (len(value) == 1 or value[1:2].isspace()):
        return "*"
    match = _PRODUCT_BYTES.match(value)
    return match.group(0).decode("ascii").lower() if match else ""


def _delay_of(value: bytes) -> float | None:
    """Seconds from a ``crawl-delay`` value (its first word, plain decimal), or None."""
    words = value.split(maxsplit=1)
    if not words or _DECIMAL.fullmatch(words[0]) is None:
        return None
    delay = float(words[0])
    return delay if math.isfinite(delay) else None


def _pattern_of(value: bytes) -> str:
    if value[:1] not in (b"/", b"*"):
        value = b"/" + value
    return normalize_bytes(value)


def _decode_body(body: bytes) -> bytes:
    """Undo the byte-order marks; the result is meant to be UTF-8 (but need not be valid)."""
    if body[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return body.decode("utf-16", "replace").encode("utf-8")
    for size in (3, 2, 1):
        if body[:size] == _UTF8_BOM[:size]:
            return body[size:]
    return body


def _parse_lines(body: bytes) -> tuple[list[_GroupBuilder], list[str]]:
    groups: list[_GroupBuilder] = []
    sitemaps: dict[str, None] = {}
    current: _GroupBuilder | None = None
    for line in body.splitlines():
        comment = line.find(b"#")
        if comment >= 0:
            line = line[:comment]
        colon = line.find(b":")
        if colon < 0:
            continue
        key = _KEYS.get(line[:colon].strip().lower())
        if key is None:
            continue
        value = line[colon + 1 :].strip()
        if key == _UA:
            if current is None or current.has_rules:
                current = _GroupBuilder()
                groups.append(current)
            current.agents.append(_agent_of(value))
        elif key == _SITEMAP:
            if value:
                sitemaps[value.decode("utf-8", "replace")] = None
        elif current is None:
            continue  # a rule or delay outside any group
        elif key == _DELAY:
            delay = _delay_of(value)
            if delay is not None:
                old = current.crawl_delay
                current.crawl_delay = delay if old is None else max(old, delay)
        else:
            current.has_rules = True
            if value:
                current.rules.append(Rule(allow=key == _ALLOW, pattern=_pattern_of(value)))
    return groups, list(sitemaps)


_MISSING: Final = RobotsGroup(RuleSet(()), None)  # cache sentinel, never handed out
_CACHE_LIMIT: Final = 32


class RobotsTxt:
    """A parsed robots.txt; immutable after :meth:`parse` (an internal cache aside).

    ``sitemaps`` are the Sitemap URLs in file order; ``digest`` is the SHA-256
    (hex) of the octets that were parsed, for audit trails. Thread-safe.
    """

    __slots__ = ("_by_agent", "_cache", "_groups", "_star", "digest", "sitemaps")

    digest: str
    sitemaps: tuple[str, ...]
    _groups: tuple[_GroupBuilder, ...]
    _by_agent: dict[str, tuple[int, ...]]
    _star: tuple[int, ...]
    _cache: dict[str, RobotsGroup]

    def __init__(self, body: bytes) -> None:
        """Use :meth:`parse`, :meth:`allow_all` or :meth:`disallow_all`."""
        body = bytes(body[:MAX_ROBOTS_BYTES])
        groups, sitemaps = _parse_lines(_decode_body(body))
        by_agent: dict[str, list[int]] = {}
        star: list[int] = []
        for index, group in enumerate(groups):
            for agent in dict.fromkeys(group.agents):
                if agent == "*":
                    star.append(index)
                elif agent:
                    by_agent.setdefault(agent, []).append(index)
        object.__setattr__(self, "digest", hashlib.sha256(body).hexdigest())
        object.__setattr__(self, "sitemaps", tuple(sitemaps))
        object.__setattr__(self, "_groups", tuple(groups))
        object.__setattr__(self, "_by_agent", {a: tuple(i) for a, i in by_agent.items()})
        object.__setattr__(self, "_star", tuple(star))
        object.__setattr__(self, "_cache", {})

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"RobotsTxt is immutable (cannot set {name!r})")

    @classmethod
    def parse(cls, body: bytes) -> RobotsTxt:
        """Parse a robots.txt body (the first :data:`MAX_ROBOTS_BYTES` octets). Never raises."""
        return cls(body)

    @classmethod
    def allow_all(cls) -> RobotsTxt:
        """The rules when robots.txt is unavailable (4xx): everything is allowed. One
        shared instance: the frontier asks for it on every lease of such a host and
        remembers values (Crawl-delay, compiled groups) by the rules' identity."""
        return _ALLOW_ALL

    @classmethod
    def disallow_all(cls) -> RobotsTxt:
        """The rules when robots.txt is unreachable (5xx, 429, network error).

        Every path of every agent is disallowed except ``/robots.txt`` itself.
        """
        return cls(b"User-agent: *\nDisallow: /\n")

    def group_for(self, agent_token: str) -> RobotsGroup | None:
        """The merged group that applies to ``agent_token``, or None (no group: allow all).

        Groups naming the token (case-insensitively) are merged; failing that,
        the ``*`` groups. Compiled on first use and cached per token.
        """
        cached = self._cache.get(agent_token)
        if cached is None:
            cached = self._build(agent_token)
            if len(self._cache) < _CACHE_LIMIT:  # a crawler asks for one or two tokens
                self._cache[agent_token] = cached
        return None if cached is _MISSING else cached

    def _build(self, agent_token: str) -> RobotsGroup:
        indexes = self._by_agent.get(agent_token.lower()) or self._star
        if not indexes:
            return _MISSING
        chosen = [self._groups[i] for i in indexes]
        delays = [g.crawl_delay for g in chosen if g.crawl_delay is not None]
        return RobotsGroup(
            rules=RuleSet(_chain(g.rules for g in chosen)),
            crawl_delay=max(delays) if delays else None,
        )

    def allowed(self, agent_token: str, path: str) -> bool:
        """Whether ``agent_token`` may fetch ``path`` (URL path plus optional ``?query``).

        ``path`` is as it appears in the URL; percent-encoded and literal
        forms of a character compare equal where RFC 9309 §2.2.2 says so.
        """
        check = self.check(agent_token, path)
        check.advance(sys.maxsize)
        return check.allowed

    def check(self, agent_token: str, path: str) -> PathCheck:
        """The decision :meth:`allowed` makes, as a :class:`PathCheck` to take in steps
        (its work is bounded per :meth:`PathCheck.advance`; see ``robots_match``)."""
        path, rules, verdict = self._rules_for(agent_token, path)
        return PathCheck.decided(verdict) if rules is None else rules.check(path)

    def decide_at_once(self, agent_token: str, path: str) -> tuple[bool | None, int] | None:
        """``(verdict, units)`` of :meth:`check` when the decision takes one step (no
        rules apply, or plain prefix rules), without a :class:`PathCheck`; None when it
        must be taken in steps. Allowed unless the verdict is False."""
        # _rules_for and group_for's cache hit, inlined: this runs once per page lease
        if not path.startswith("/"):
            path = "/" + path
        if _path_needs_fix(path) is not None:  # normalize()'s quick test, inlined
            path = normalize(path)
        if path == _ROBOTS_PATH or path.startswith(_ROBOTS_QUERY):
            return True, 0
        group = self._cache.get(agent_token)
        if group is None:
            group = self.group_for(agent_token)
            if group is None:
                return None, 0
        elif group is _MISSING:
            return None, 0
        return group.rules.decide_at_once(path)

    def _rules_for(self, agent_token: str, path: str) -> tuple[str, RuleSet | None, bool | None]:
        """The normalised path and the rules that decide it, or no rules and the verdict
        (robots.txt itself is always allowed; no group for the agent allows all)."""
        if not path.startswith("/"):
            path = "/" + path
        path = normalize(path)
        if path == _ROBOTS_PATH or path.startswith(_ROBOTS_QUERY):
            return path, None, True
        group = self.group_for(agent_token)
        if group is None:
            return path, None, None
        return path, group.rules, None

    def prepare(self, agent_token: str) -> RobotsTxt:
        """Compile the group of ``agent_token`` now (it is otherwise compiled on first
        use), so that the cost is paid where the caller parses: off the event loop."""
        self.group_for(agent_token)
        return self

    def crawl_delay(self, agent_token: str) -> float | None:
        """Seconds between requests asked of ``agent_token`` (max over merged groups), or None."""
        group = self.group_for(agent_token)
        return None if group is None else group.crawl_delay

    def __repr__(self) -> str:
        return (
            f"RobotsTxt(groups={len(self._groups)}, sitemaps={len(self.sitemaps)}, "
            f"digest={self.digest[:12]}…)"
        )


_ALLOW_ALL: Final = RobotsTxt(b"")
_path_needs_fix: Final = PATH_NEEDS_FIX.search


def _chain(rule_lists: Iterable[list[Rule]]) -> Iterable[Rule]:
    for rules in rule_lists:
        yield from rules
