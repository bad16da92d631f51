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
octets — and ``Allow`` wins a tie. Identical ``*`` patterns are kept once.

A decision can also be taken in steps (:meth:`RuleSet.check` →
:class:`PathCheck`): its work is counted in *units* (one dictionary probe; a
``*`` rule costs one per segment and per :data:`SEGMENT_SPAN` characters of
segment, times one per :data:`FIND_SPAN` characters of path), and
:meth:`PathCheck.advance` stops once it has spent about the units it was given,
keeping its place. A robots.txt of 500 KiB can hold tens of thousands of ``*``
rules that one path must be tried against; the frontier takes such a decision
over several turns of the event loop instead of in one block (DESIGN §3).
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from typing import Final

_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

#: an escape, or an octet that must be escaped (anything but printable ASCII)
_TO_FIX = re.compile(rb"%([0-9A-Fa-f]{2})|[^\x21-\x7e]")
#: quick tests: input that needs no rewriting at all (printable ASCII, no "%")
_BYTES_NEED_FIX = re.compile(rb"[^\x21-\x24\x26-\x7e]")
_STR_NEEDS_FIX = re.compile(r"[^\x21-\x24\x26-\x7e]")
#: :func:`normalize` returns a path unchanged unless this finds something in it
PATH_NEEDS_FIX: Final = _STR_NEEDS_FIX

#: characters of path one work unit of ``str.find`` stands for
FIND_SPAN: Final = 256
#: characters of a segment that add one unit to the cost of searching for it
SEGMENT_SPAN: Final = 8
#: units a stepped decision spends between two looks at its budget
_PAUSE_EVERY: Final = 256


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
    if _BYTES_NEED_FIX.search(raw) is None:
        return raw.decode("ascii")
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
    """A pattern with a ``*`` after its literal head: the segments between the stars.

    :meth:`matches_after` is called only once the path is known to start with
    the head; each segment is found at its leftmost place, which is optimal
    for ``*``-only globs, so matching is a handful of ``str.find`` calls.
    """

    length: int
    allow: bool
    head_length: int
    middle: tuple[str, ...]
    tail: str
    anchored: bool
    #: work units of :meth:`matches_after` on a path of up to :data:`FIND_SPAN`
    #: characters: one per segment searched, plus one per :data:`SEGMENT_SPAN`
    #: characters of it (a search costs up to path × segment length)
    weight: int

    def matches_after(self, path: str) -> bool:
        pos = self.head_length
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


@dataclass(slots=True)
class _Pending:
    """Rules sharing one literal head, while a :class:`RuleSet` is being built."""

    plain: bool | None = None  # a plain prefix rule equal to the head: Allow?
    #: by pattern: a pattern written twice is tried once (Allow wins a tie)
    wildcards: dict[str, _Wildcard] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Entry:
    """Every rule whose literal head is one given string, compiled."""

    plain: bool | None
    wildcards: tuple[_Wildcard, ...]  # longest first, Allow before Disallow
    longest: int  # the longest pattern in this entry


class RuleSet:
    """The compiled rules of one merged group; immutable, safe to share.

    Rules are indexed by their literal head (the text before the first
    ``*``, or the whole pattern): one dictionary per head length. A lookup
    walks head lengths from the longest down, so it costs one slice and one
    dictionary probe per distinct head length, plus the ``*`` rules whose
    head is a prefix of the path.

    ``decide(path)`` returns ``True`` (allowed) / ``False`` (disallowed) for
    the best matching rule, or ``None`` when no rule matches. ``path`` must
    already be :func:`normalize`-d.
    """

    __slots__ = ("_exact", "_levels", "_plain", "_rule_count")

    def __init__(self, rules: Iterable[Rule]) -> None:
        pending: dict[int, dict[str, _Pending]] = {}
        #: "$"-anchored literals: literal -> (pattern length, Allow?)
        exact: dict[str, tuple[int, bool]] = {}
        count = 0
        for rule in rules:
            count += 1
            self._add(rule, pending, exact)
        # levels, longest head first; each carries the longest pattern at or below it,
        # so a lookup can stop once nothing shorter could beat what it has found
        levels: list[tuple[int, dict[str, _Entry], int]] = []
        floor = -1
        for head_length in sorted(pending):
            entries: dict[str, _Entry] = {}
            for head, built in pending[head_length].items():
                wildcards = sorted(built.wildcards.values(),
                                   key=lambda w: (-w.length, not w.allow))
                longest = max(
                    [head_length if built.plain is not None else -1] + [w.length for w in wildcards]
                )
                entries[head] = _Entry(built.plain, tuple(wildcards), longest)
                floor = max(floor, longest)
            levels.append((head_length, entries, floor))
        levels.reverse()
        self._levels = tuple(levels)
        self._exact = exact
        self._rule_count = count
        # no "*" rule and fewer head lengths than one pause: a walk would never yield
        # before its answer, so :meth:`check` decides at once (no generator)
        self._plain = len(levels) < _PAUSE_EVERY and not any(
            entry.wildcards for _, entries, _ in levels for entry in entries.values())

    @staticmethod
    def _add(
        rule: Rule,
        pending: dict[int, dict[str, _Pending]],
        exact: dict[str, tuple[int, bool]],
    ) -> None:
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
            return
        head, *rest = body.split("*")
        entry = pending.setdefault(len(head), {}).setdefault(head, _Pending())
        if not rest and len(body) == length:
            entry.plain = bool(entry.plain) or rule.allow  # Allow wins a tie
            return
        # inner stars, or trailing stars that make the pattern longer than its head
        old_wildcard = entry.wildcards.get(pattern)
        if old_wildcard is not None and (old_wildcard.allow or not rule.allow):
            return
        entry.wildcards[pattern] = _Wildcard(
            length=length,
            allow=rule.allow,
            head_length=len(head),
            middle=tuple(p for p in rest[:-1] if p),
            tail=rest[-1] if rest else "",
            anchored=anchored,
            weight=max(1, sum(1 + len(p) // SEGMENT_SPAN for p in rest)),
        )

    def __len__(self) -> int:
        """Number of rules compiled into this set."""
        return self._rule_count

    def decide(self, path: str) -> bool | None:
        """Allowed (True), disallowed (False) or no rule matched (None) for a normalised path."""
        walk = self._walk(path)
        try:
            while True:
                next(walk)
        except StopIteration as done:
            verdict: bool | None = done.value
            return verdict

    def check(self, path: str) -> PathCheck:
        """The decision for a normalised ``path``, to be taken in steps (taken at once,
        with the same answer and units, for a set of plain prefix rules)."""
        at_once = self.decide_at_once(path)
        if at_once is not None:
            return PathCheck.decided(*at_once)
        return PathCheck(self._walk(path))

    def decide_at_once(self, path: str) -> tuple[bool | None, int] | None:
        """``(verdict, units)`` of :meth:`check` for a set decided at once (plain
        prefix rules), without a :class:`PathCheck`; None when it must be stepped.

        What :meth:`_walk` finds for a set without ``*`` rules, with the units the walk
        would have spent (one per head length tried); once per page lease, so
        :func:`_better` is inlined."""
        if not self._plain:
            return None
        best_length = -1
        best_allow = False
        if self._exact:
            hit = self._exact.get(path)
            if hit is not None:
                best_length, best_allow = hit
        size = len(path)
        units = 0
        for head_length, entries, floor in self._levels:
            if floor < best_length:
                break
            if head_length > size:
                continue
            units += 1
            entry = entries.get(path[:head_length])
            if entry is not None:
                allow = entry.plain
                if allow is not None and (head_length > best_length or (
                        head_length == best_length and allow and not best_allow)):
                    best_length, best_allow = head_length, allow
        return (None if best_length < 0 else best_allow), units

    def _walk(self, path: str) -> Generator[int, None, bool | None]:
        """Yields the work units spent since its last yield (about every
        :data:`_PAUSE_EVERY`); returns what :meth:`decide` returns."""
        best_length = -1
        best_allow = False
        if self._exact:
            hit = self._exact.get(path)
            if hit is not None:
                best_length, best_allow = hit
        size = len(path)
        span = 1 + size // FIND_SPAN  # units of one str.find over this path
        units = 0
        for head_length, entries, floor in self._levels:
            if floor < best_length:
                break  # nothing at this head length or shorter can win
            if head_length > size:
                continue
            units += 1
            if units >= _PAUSE_EVERY:
                yield units
                units = 0
            entry = entries.get(path[:head_length])
            if entry is None or entry.longest < best_length:
                continue
            plain = entry.plain
            if plain is not None and _better(head_length, plain, best_length, best_allow):
                best_length, best_allow = head_length, plain
            for wildcard in entry.wildcards:  # longest first, Allow first
                length = wildcard.length
                if length < best_length or (
                        length == best_length and (best_allow or not wildcard.allow)):
                    break  # neither this rule nor any after it can win
                units += wildcard.weight * span
                if wildcard.matches_after(path):
                    best_length, best_allow = length, wildcard.allow
                    break
                if units >= _PAUSE_EVERY:
                    yield units
                    units = 0
        if units:
            yield units
        if best_length < 0:
            return None
        return best_allow


class PathCheck:
    """One robots decision taken in steps; see :meth:`RuleSet.check`.

    :meth:`advance` works until the decision is made (:attr:`done`, then
    :attr:`verdict` as :meth:`RuleSet.decide` would say) or about ``budget``
    units are spent; it returns the units spent. One call overshoots its
    budget by at most one ``*`` rule's weight (times the path's span) plus
    :data:`_PAUSE_EVERY`. :attr:`units` is the total spent so far.
    """

    __slots__ = ("_unpaid", "_walk", "done", "units", "verdict")

    def __init__(self, walk: Generator[int, None, bool | None] | None,
                 verdict: bool | None = None, units: int = 0) -> None:
        self._walk = walk
        self.done = walk is None
        self.verdict = verdict
        self.units = 0
        self._unpaid = units

    @classmethod
    def decided(cls, verdict: bool | None, units: int = 0) -> PathCheck:
        """A check whose answer is already known: no rules to try, or taken at once
        for ``units`` of work (which the first :meth:`advance` returns)."""
        return cls(None, verdict, units)

    @property
    def allowed(self) -> bool:
        """The decision once :attr:`done`: no rule matched, or an Allow rule won."""
        return self.verdict is not False

    def advance(self, budget: int) -> int:
        spent, self._unpaid = self._unpaid, 0
        walk = self._walk
        while walk is not None and spent < budget:
            try:
                spent += next(walk)
            except StopIteration as finished:
                self.verdict, self.done, self._walk, walk = finished.value, True, None, None
        self.units += spent
        return spent
