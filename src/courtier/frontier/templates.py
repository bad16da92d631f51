"""URL templates and a tiny distinct counter, the building blocks of trap detection.

A *template* is a URL's path and query with everything that usually varies
between pages of one kind abstracted away, so that ``/cal/2026/11`` and
``/cal/1999/02`` (or ``/item/9f86d081…?sid=AbC…`` and ``/item/1b4f0e98…?sid=xYz…``)
fall into the same bucket. :mod:`courtier.frontier.traps` counts URLs,
fetches and duplicate content per template to find the buckets that explode.

Abstraction rules of :func:`url_template` (applied to each path segment and to
each query parameter *name*; the first matching rule wins at each position):

===========  ==========================================================  =========
placeholder  matches                                                      example
===========  ==========================================================  =========
``{uuid}``   8-4-4-4-12 hex digits                                        ``3f2b…-…``
``{date}``   ``YYYY-MM-DD``, ``YYYY_MM_DD``, ``YYYY.MM.DD`` (1900–2099)     ``2026-11-03``
``{hex}``    8+ hex digits with at least one digit *and* one letter a–f   ``9f86d08``
``{id}``     16+ ``[A-Za-z0-9_-]`` with a digit and a letter (tokens)      ``Ab12…``
``{n}``      any other run of decimal digits                              ``page-12``
===========  ==========================================================  =========

Dates split over segments (``/2026/11``) become ``/{n}/{n}``. In matrix
parameters (``;jsessionid=…``) the value is replaced by ``*``. Query *values*
are dropped entirely; the template keeps the sorted set of (abstracted)
parameter names: ``/shop?sort=p&color=red&size=m&color=blue`` →
``/shop?color&size&sort``. Templates longer than :data:`MAX_TEMPLATE_CHARS`
are cut and suffixed with a short hash of the whole, so memory per template
is bounded.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import xxhash

if TYPE_CHECKING:
    from courtier.frontier.trap_rules import TrapRules

__all__ = [
    "MAX_TEMPLATE_CHARS",
    "SESSION_PARAMS",
    "DistinctCounter",
    "TemplateStats",
    "facet_atoms",
    "hash64",
    "session_alias",
    "url_hash64",
    "url_template",
]

#: Longest template kept verbatim (the rest is replaced by a hash).
MAX_TEMPLATE_CHARS = 256

_TOKEN = re.compile(
    r"(?P<uuid>[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})"
    r"|(?P<date>(?<![0-9])(?:19|20)[0-9]{2}(?P<sep>[-_.])[0-9]{1,2}(?P=sep)[0-9]{1,2}(?![0-9]))"
    r"|(?P<hex>(?<![0-9A-Za-z])(?=[0-9A-Fa-f]*[0-9])(?=[0-9A-Fa-f]*[A-Fa-f])"
    r"[0-9A-Fa-f]{8,}(?![0-9A-Za-z]))"
    r"|(?P<id>(?<![0-9A-Za-z_-])(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])"
    r"[A-Za-z0-9_-]{16,}(?![0-9A-Za-z_-]))"
    r"|(?P<n>[0-9]+)"
)
_MATRIX = re.compile(r";([^;=/]*)=[^;/]*")

#: Query (and matrix) parameter names that carry session ids (compared
#: lower-case). A URL that differs from another only in these is an alias.
SESSION_PARAMS = frozenset(
    {
        "sid",
        "sessid",
        "sessionid",
        "session_id",
        "session",
        "jsessionid",
        "phpsessid",
        "aspsessionid",
        "cfid",
        "cftoken",
        "zenid",
        "oscsid",
        "s_id",
    }
)
_MATRIX_SESSION = re.compile(r";(?:jsessionid|phpsessid|sessionid|sid)=[^;/?]*", re.IGNORECASE)


#: :func:`_abstract`'s results for short segments and names (which repeat on every URL
#: of a site: ``p``, ``page-2``, ``index.html``), cleared when full
_ABSTRACT_MEMO: dict[str, str] = {}
_ABSTRACT_MEMO_LIMIT = 16_384
_ABSTRACT_MEMO_MAX_CHARS = 64


def _abstract(text: str) -> str:
    """Replace the variable parts of one segment or parameter name by placeholders."""
    if not text:
        return text
    known = _ABSTRACT_MEMO.get(text)
    if known is not None:
        return known
    out = _MATRIX.sub(r";\1=*", text) if ";" in text else text
    out = _TOKEN.sub(lambda m: "{" + str(m.lastgroup) + "}", out)
    if len(text) <= _ABSTRACT_MEMO_MAX_CHARS:
        if len(_ABSTRACT_MEMO) >= _ABSTRACT_MEMO_LIMIT:
            _ABSTRACT_MEMO.clear()
        _ABSTRACT_MEMO[text] = out
    return out


def url_template(path_and_query: str) -> str:
    """The template of a URL's path and query (see the module docstring).

    Pure and total: any string is accepted (a fragment, if present, is
    ignored) and the result never exceeds ``MAX_TEMPLATE_CHARS + 17``
    characters. URLs of one template differ only in numbers, ids, dates,
    matrix-parameter values, query values, and query-parameter order or
    repetition.
    """
    path, _, query = path_and_query.partition("#")[0].partition("?")
    template = "/".join([_abstract(segment) for segment in path.split("/")])
    if query:
        names = {_abstract(part.partition("=")[0]) for part in query.split("&") if part}
        names.discard("")
        if names:
            template += "?" + "&".join(sorted(names))
    if len(template) > MAX_TEMPLATE_CHARS:
        digest = xxhash.xxh3_64_hexdigest(template.encode("utf-8", "surrogatepass"))
        template = template[:MAX_TEMPLATE_CHARS] + "~" + digest
    return template


_NUMERIC = re.compile(r"[0-9.,_-]*")
_VALUE_SPLIT = re.compile(r"[,|+ ]|%2C|%7C|%20", re.IGNORECASE)


def facet_atoms(query: str) -> tuple[str, list[str]] | None:
    """The facet *combination* of a query and its *atoms*, or ``None``.

    Atoms are ``name=value`` pairs with non-numeric values, multi-values
    (``color=red,blue``, ``color=red&color=blue``) split into one atom each;
    the combination is the sorted set of atoms. Numeric values (pages,
    prices, ids) are left out, so ``?cat=shoes&page=3`` has one atom.
    ``None`` when fewer than two parameter names carry atoms (no facets).
    """
    atoms: set[str] = set()
    names: set[str] = set()
    for part in query.split("&"):
        name, _, value = part.partition("=")
        for item in _VALUE_SPLIT.split(value):
            if item and not _NUMERIC.fullmatch(item):
                atoms.add(name + "=" + item)
                names.add(name)
    if len(names) < 2:
        return None
    ordered = sorted(atoms)
    return "&".join(ordered), ordered


def session_alias(path_and_query: str) -> str | None:
    """``path_and_query`` without its session-id parameters, or ``None`` if it has none.

    Two URLs with the same alias differ only in session ids (names in
    :data:`SESSION_PARAMS`, in the query or as ``;jsessionid=``-style matrix
    parameters), so they almost certainly name the same page.
    """
    path, _, query = path_and_query.partition("#")[0].partition("?")
    found = False
    if ";" in path:
        stripped = _MATRIX_SESSION.sub("", path)
        found = stripped != path
        path = stripped
    if query:
        kept = []
        for part in query.split("&"):
            if part.partition("=")[0].lower() in SESSION_PARAMS:
                found = True
            else:
                kept.append(part)
        query = "&".join(kept)
    if not found:
        return None
    return path + ("?" + query if query else "")


class DistinctCounter:
    """Approximate count of distinct 64-bit hashes in 256 bytes (HyperLogLog).

    ``add`` takes a uniformly distributed 64-bit integer (an xxh3 hash or the
    hash part of a ``url_key``); adding the same value again changes nothing,
    so repeated offers of one URL are counted once. ``count()`` uses linear
    counting while registers are sparse (up to ~600 values; typical error
    1–4 %) and the HyperLogLog estimate above that (standard error
    ≈ 6.5 %).
    """

    __slots__ = ("_registers", "_scaled_sum")

    _M = 256
    _BITS = 8  # log2(_M)
    _ALPHA = 0.7182  # HyperLogLog bias constant for m = 256 (0.7213 / (1 + 1.079 / m))

    def __init__(self) -> None:
        self._registers = bytearray(self._M)
        # sum of 2**-r over the registers, times 2**64: exact (r <= 57), kept up to date
        # by add() so that count() needs no pass over the 256 registers
        self._scaled_sum = self._M << 64

    def add(self, value: int) -> None:
        """Record one 64-bit hash value."""
        index = value & (self._M - 1)
        rest = (value >> self._BITS) & ((1 << 56) - 1)
        rank = 57 - rest.bit_length()  # leading zeros in 56 bits, plus one
        old = self._registers[index]
        if rank > old:
            self._registers[index] = rank
            self._scaled_sum += (1 << (64 - rank)) - (1 << (64 - old))

    def registers(self) -> bytes:
        """The 256 registers (what :meth:`from_registers` rebuilds the counter from)."""
        return bytes(self._registers)

    @classmethod
    def from_registers(cls, registers: bytes) -> DistinctCounter:
        """A counter with these registers; ValueError unless 256 bytes of ranks <= 57."""
        if len(registers) != cls._M or max(registers, default=0) > 57:
            raise ValueError("distinct counter registers: 256 ranks of at most 57 expected")
        counter = cls()
        counter._registers = bytearray(registers)
        counter._scaled_sum = sum(1 << (64 - r) for r in registers)
        return counter

    def merge(self, other: DistinctCounter) -> None:
        """Count the union: each register the larger of both (idempotent, commutative)."""
        for index, rank in enumerate(other._registers):
            old = self._registers[index]
            if rank > old:
                self._registers[index] = rank
                self._scaled_sum += (1 << (64 - rank)) - (1 << (64 - old))

    def count(self) -> int:
        """Estimated number of distinct values added (0 when nothing was added)."""
        registers = self._registers
        zeros = registers.count(0)
        m = self._M
        if zeros == m:
            return 0
        raw = self._ALPHA * m * m / (self._scaled_sum / (1 << 64))
        if raw <= 2.5 * m and zeros:
            return round(m * math.log(m / zeros))
        return round(raw)


def hash64(value: str | bytes | int) -> int:
    """A 64-bit hash of a content fingerprint (digest string, bytes or SimHash)."""
    if isinstance(value, int):
        return xxhash.xxh3_64_intdigest(value.to_bytes(16, "little", signed=True))
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogatepass")
    return xxhash.xxh3_64_intdigest(value)


def url_hash64(url_key: bytes) -> int:
    """The 64-bit hash part of a 16-byte ``url_key`` (its first 4 bytes are the host's)."""
    if len(url_key) >= 12:
        return int.from_bytes(url_key[4:12], "little")
    return xxhash.xxh3_64_intdigest(url_key)


@dataclass(slots=True)
class TemplateStats:
    """Counters of one template on one host (a few hundred bytes, fixed).

    Distinct counts are :class:`DistinctCounter` estimates; ``aliases``,
    ``combos`` and ``atoms`` exist only for templates with session
    parameters or facet-like queries. ``since``/``reason`` are set once the
    template is throttled (see :mod:`courtier.frontier.traps`).
    """

    admitted: DistinctCounter = field(default_factory=DistinctCounter)
    discovered: DistinctCounter = field(default_factory=DistinctCounter)
    contents: DistinctCounter = field(default_factory=DistinctCounter)
    aliases: DistinctCounter | None = None
    combos: DistinctCounter | None = None
    atoms: DistinctCounter | None = None
    fetched: int = 0
    sampled: int = 0
    min_depth: int | None = None
    max_depth: int | None = None
    hour: int = 0
    this_hour: int = 0
    last_hour: int = 0
    since: float | None = None
    reason: str | None = None

    def duplicate_share(self) -> float:
        if self.fetched == 0:
            return 0.0
        distinct = min(self.contents.count(), self.fetched)
        return 1.0 - distinct / self.fetched

    def note_facets(self, query: str) -> None:
        facets = facet_atoms(query)
        if facets is None:
            return
        if self.combos is None or self.atoms is None:
            self.combos, self.atoms = DistinctCounter(), DistinctCounter()
        combo, atoms = facets
        self.combos.add(hash64(combo))
        for atom in atoms:
            self.atoms.add(hash64(atom))

    def note_admission(self, now: float, key: int, depth: int | None, alias: str | None) -> None:
        self.admitted.add(key)
        if alias is not None:
            if self.aliases is None:
                self.aliases = DistinctCounter()
            self.aliases.add(hash64(alias))
        hour = int(now // 3600)
        if hour != self.hour:
            self.last_hour = self.this_hour if hour == self.hour + 1 else 0
            self.this_hour = 0
            self.hour = hour
        self.this_hour += 1
        if depth is not None:
            self.min_depth = depth if self.min_depth is None else min(self.min_depth, depth)
            self.max_depth = depth if self.max_depth is None else max(self.max_depth, depth)

    def explosion(self, rules: TrapRules) -> str | None:
        """The rule this template now breaks (module docstring), or None."""
        admitted = self.admitted.count()
        if admitted < rules.template_min_urls:
            return None
        if self.fetched >= rules.template_min_fetched:
            share = self.duplicate_share()
            if share >= rules.template_max_duplicate_share:
                return "duplicate content"
            growth = rules.template_max_growth
            distinct = max(1, min(self.contents.count(), self.fetched))
            if (
                growth is not None
                and share >= rules.template_growth_min_duplicate_share
                and self.discovered.count() >= growth * distinct
            ):
                return "growth outpaces content"
        per_alias = rules.template_max_session_aliases
        aliases = self.aliases
        if (
            per_alias is not None
            and aliases is not None
            and admitted >= per_alias * max(1, aliases.count())
        ):
            return "session ids"
        per_atom = rules.template_max_facet_combinations
        combos, atoms = self.combos, self.atoms
        if (
            per_atom is not None
            and combos is not None
            and atoms is not None
            and combos.count() >= per_atom * max(1, atoms.count())
        ):
            return "facet combinations"
        span = rules.template_max_depth_span
        low, high = self.min_depth, self.max_depth
        if span is not None and low is not None and high is not None and high - low >= span:
            return "chain of links"
        return None
