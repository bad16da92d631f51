"""Path normalisation and the precompiled rule matcher behind :mod:`courtier.politeness.robots`.

RFC 9309 §2.2.2 compares a rule's pattern with the URL's path and query after
both have been brought to one percent-encoded form. :func:`normalize` is that
form, applied identically to patterns (at parse time) and to request paths
(at match time):

* ``%xx`` escaping an *unreserved* ASCII character (``A-Z a-z 0-9 - . _ ~``)
  is decoded (``/%7Efoo`` ≡ ``/~foo``);
* any other ``%xx`` keeps its escape, with upper-case hex (``%aa`` → ``%AA``),
  so an escaped reserved character (``%2F``) never equals the literal one;
* every octet outside printable ASCII (UTF-8 of non-ASCII text, controls,
  space) is percent-encoded (``ツ`` → ``%E3%83%84``);
* a ``%`` not followed by two hex digits is kept as it is.

:class:`RuleSet` holds one merged group's rules, compiled once: plain prefixes
in a dictionary per prefix length, ``$``-anchored literals in a dictionary, and
``*`` patterns as literal segments matched with ``str.find`` (linear, no
regular-expression backtracking, so a hostile pattern cannot stall a worker).
The most specific rule wins — the one whose normalised pattern has the most
octets — and ``Allow`` wins a tie.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

#: an escape, or an octet that must be escaped (anything but printable ASCII)
_TO_FIX = re.compile(rb"%([0-9A-Fa-f]{2})|[^\x21-\x7e]")
#: quick test: a str path that needs no rewriting at all
_STR_NEEDS_FIX = re.compile(r"[^\x21-\x24\x26-\x7e]")


def _fix(match: re.Match[bytes]) -> bytes:
    hex_digits = match.group(1)
    if hex_digits is None:
        return b"%%%02X" % match.group(0)[0]
    octet = int(hex_digits, 16)
    if octet in _UNRESERVED:
        return bytes((octet,))
    return b"%" + hex_digits.upper()


def normalize_bytes(raw: bytes) -> str:
    """The canonical comparison form of a pattern or path given as octets (pure ASCII out)."""
    return _TO_FIX.sub(_fix, raw).decode("ascii")


def normalize(path: str) -> str:
    """The canonical comparison form of a request path (``/path?query``).

    Non-ASCII characters are taken as their UTF-8 octets. Never raises; a
    path that is already canonical is returned unchanged without copying.
    """
    if _STR_NEEDS_FIX.search(path) is None:
        return path
    return normalize_bytes(path.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class Rule:
    """One Allow/Disallow line of a group, pattern already normalised (never empty)."""

    allow: bool
    pattern: str


@dataclass(frozen=True, slots=True)
class _Wildcard:
    """A pattern with at least one inner ``*``: literal segments between the stars."""

    length: int
    allow: bool
    head: str
    middle: tuple[str, ...]
    tail: str
    anchored: bool

    def matches(self, path: str) -> bool:
        if not path.startswith(self.head):
            return False
        pos = len(self.head)
        for segment in self.middle:
            found = path.find(segment, pos)
            if found < 0:
                return False
            pos = found + len(segment)
        if self.anchored:
            # the tail must end the path and must not overlap what was consumed
            return len(path) - len(self.tail) >= pos and path.endswith(self.tail)
        return path.find(self.tail, pos) >= 0


def _better(length: int, allow: bool, best_length: int, best_allow: bool) -> bool:
    """Whether a match (length, allow) beats the best so far (longest wins, Allow ties)."""
    return length > best_length or (length == best_length and allow and not best_allow)


class RuleSet:
    """The compiled rules of one merged group; immutable, safe to share.

    ``decide(path)`` returns ``True`` (allowed) / ``False`` (disallowed) for
    the best matching rule, or ``None`` when no rule matches. ``path`` must
    already be :func:`normalize`-d.
    """

    __slots__ = ("_exact", "_lengths", "_prefixes", "_rule_count", "_wildcards")

    def __init__(self, rules: Iterable[Rule]) -> None:
        #: plain prefixes (no "*", no "$"): prefix length -> prefix -> Allow?
        prefixes: dict[int, dict[str, bool]] = {}
        #: "$"-anchored literals: literal -> (pattern length, Allow?)
        exact: dict[str, tuple[int, bool]] = {}
        wildcards: list[_Wildcard] = []
        count = 0
        for rule in rules:
            count += 1
            pattern = rule.pattern
            length = len(pattern)  # specificity counts the pattern as written, "*"/"$" included
            anchored = pattern.endswith("$")
            body = pattern[:-1] if anchored else pattern
            if anchored and body.endswith("*"):
                anchored = False  # "…*$" matches any ending: the anchor says nothing
            if not anchored:
                body = body.rstrip("*")  # trailing stars add nothing to a prefix match
            if "*" not in body and anchored:
                old = exact.get(body)
                if old is None or _better(length, rule.allow, old[0], old[1]):
                    exact[body] = (length, rule.allow)
            elif "*" not in body and len(body) == length:
                bucket = prefixes.setdefault(length, {})
                bucket[body] = bucket.get(body, False) or rule.allow  # Allow wins a tie
            else:
                # inner stars, or trailing stars that make the pattern longer than its
                # prefix (their specificity differs from the prefix's length)
                head, *rest = body.split("*")
                wildcards.append(
                    _Wildcard(
                        length=length,
                        allow=rule.allow,
                        head=head,
                        middle=tuple(p for p in rest[:-1] if p),
                        tail=rest[-1] if rest else "",
                        anchored=anchored,
                    )
                )
        self._rule_count = count
        self._prefixes = prefixes
        self._lengths = tuple(sorted(prefixes, reverse=True))
        self._exact = exact
        # longest first, Allow before Disallow at equal length: the first hit wins
        wildcards.sort(key=lambda w: (-w.length, not w.allow))
        self._wildcards = tuple(wildcards)

    def __len__(self) -> int:
        """Number of rules compiled into this set."""
        return self._rule_count

    def decide(self, path: str) -> bool | None:
        """Allowed (True), disallowed (False) or no rule matched (None) for a normalised path."""
        best_length = -1
        best_allow = False
        size = len(path)
        prefixes = self._prefixes
        for length in self._lengths:  # longest prefix first: the first hit is the best
            if length > size:
                continue
            allow = prefixes[length].get(path[:length])
            if allow is not None:
                best_length, best_allow = length, allow
                break
        if self._exact:
            hit = self._exact.get(path)
            if hit is not None and _better(hit[0], hit[1], best_length, best_allow):
                best_length, best_allow = hit
        for wildcard in self._wildcards:
            if wildcard.length < best_length:
                break
            if _better(wildcard.length, wildcard.allow, best_length, best_allow) and (
                wildcard.matches(path)
            ):
                best_length, best_allow = wildcard.length, wildcard.allow
                break
        if best_length < 0:
            return None
        return best_allow
