"""Canonical URLs, URL keys, host keys and shards.

Every URL that enters courtier (seed, link, redirect target, sitemap entry)
passes through :func:`canonicalize` exactly once. The result, a
:class:`CanonicalUrl`, carries everything the rest of the pipeline keys on:

* ``url`` — the canonical form (the store's unique identity of a page);
* ``host_key`` — scheme + authority, the unit of robots.txt (RFC 9309) and of the
  host queue;
* ``host`` — the host name alone, the unit of the politeness clock (every scheme and
  port of one name is one server: :func:`server_of`);
* ``url_key`` — 16 bytes: 4 bytes of ``xxh3_64(host)`` followed by
  12 bytes of ``xxh3_128(url)``, so that one server's keys sort together;
* ``shard`` — the leading ``log2(SHARD_COUNT)`` bits of ``xxh3_64(host)``, which
  are also the leading bits of every ``url_key`` of that server
  (:func:`shard_of_key`), so any key names its partition; the unit of ownership, and
  every scheme and port of one host name lands in the same one.

Canonical form (changing it changes every key in every existing store, so
treat it as frozen):

1. WHATWG URL parsing (ada-url), with relative resolution against ``base``;
   leading/trailing C0-control-or-space is stripped and tabs/newlines
   removed, exactly as browsers do.
2. Only ``http`` and ``https`` are accepted; anything else raises
   :class:`~courtier.core.errors.InvalidURL` naming the scheme.
3. From WHATWG serialisation: lower-case scheme and host, IDNA → punycode,
   IPv4/IPv6 normalised, default port dropped, dot segments resolved,
   empty path → ``/``.
4. On top of WHATWG: the fragment and the userinfo (credentials) are dropped;
   an empty query (a bare ``?``) is dropped; percent-escapes of *unreserved*
   characters (``A-Z a-z 0-9 - . _ ~``) are decoded and the hex digits of all
   remaining escapes are upper-cased (RFC 3986 §6.2.2). Query parameter
   order is kept: ``?b=1&a=2`` and ``?a=2&b=1`` are different URLs.
5. A canonical URL longer than :data:`MAX_URL_LENGTH` is rejected.

The canonical form is a fixed point: ``canonicalize(c.url).url == c.url``.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import xxhash
from ada_url import join_url, normalize_url

from courtier.core.errors import InvalidURL

if TYPE_CHECKING:
    from publicsuffixlist import PublicSuffixList

__all__ = [
    "MAX_URL_LENGTH",
    "SHARD_COUNT",
    "CanonicalUrl",
    "canonicalize",
    "host_key_of",
    "is_plain_absolute",
    "make_url_key",
    "registrable_domain",
    "server_key_prefix",
    "server_of",
    "shard_of",
    "shard_of_key",
]

#: Number of shards the host space is cut into (see DESIGN.md §5). Changing it
#: reassigns every host, so it is part of a store's identity.
SHARD_COUNT = 1024
_SHARD_SHIFT = 64 - (SHARD_COUNT.bit_length() - 1)

#: Longest canonical URL accepted, in characters (the canonical form is ASCII).
MAX_URL_LENGTH = 2048

_DEFAULT_PORTS = {"http": 80, "https": 443}

#: An absolute URL already in the form ada's ``normalize_url`` gives back unchanged
#: (links from ``parse_html`` are): lower-case http(s) scheme and host of plain LDH
#: labels ending in a letter label (so never an IPv4 number), no ``xn--`` label, no
#: userinfo, ``%``, fragment, backslash, space or quote, no dot segment; a port only
#: without a leading zero (:func:`is_plain_absolute` also checks it is ≤ 65535 and not the
#: scheme's default, which ada would drop, and, with plain substring tests that are
#: cheaper than regex look-aheads, that no ``xn--`` label and no ``/.`` (a possible dot
#: segment) occur anywhere). ``_resolve`` returns such a string as is
#: instead of parsing it again (property-tested against ``normalize_url`` in
#: tests/unit/test_urls_fast_path.py).
_PLAIN_ABSOLUTE = re.compile(
    r"http(s?)://(?:[a-z0-9-]+\.)*[a-z][a-z-]*(?::([1-9][0-9]{0,4}))?"
    r"/[A-Za-z0-9\-._~/!$&()*+,;=:@]*(?:\?[A-Za-z0-9\-._~/!$&()*+,;=:@?]*)?\Z"
)

# WHATWG strips these (C0 controls and space) from both ends of the input.
_C0_SPACE = "".join(chr(c) for c in range(0x21))

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Escapes that may need rewriting: lower-case hex, or a byte in 0x20-0x7F
# (where every unreserved character lives). Upper-case escapes of other
# bytes — what ada produces for non-ASCII input — are already canonical.
_MAYBE_FIXABLE = re.compile(r"%(?:[0-9A-Fa-f][a-f]|[a-f][0-9A-Fa-f]|[2-7][0-9A-F])")


def _build_escape_table() -> dict[str, str]:
    """Map every two-hex-digit spelling (any case) to its canonical replacement."""
    table: dict[str, str] = {}
    hexdigits = "0123456789abcdefABCDEF"
    for hi in hexdigits:
        for lo in hexdigits:
            char = chr(int(hi + lo, 16))
            table[hi + lo] = char if char in _UNRESERVED else "%" + (hi + lo).upper()
    return table


_ESCAPES = _build_escape_table()


def _fix_escapes(text: str) -> str:
    """Decode escapes of unreserved characters; upper-case the hex of the others.

    A ``%`` not followed by two hex digits is left as it is (WHATWG keeps it).
    """
    parts = text.split("%")
    out = [parts[0]]
    for part in parts[1:]:
        replacement = _ESCAPES.get(part[:2])
        out.append("%" + part if replacement is None else replacement + part[2:])
    return "".join(out)


@dataclass(frozen=True, slots=True)
class CanonicalUrl:
    """A crawlable URL in canonical form and the keys derived from it.

    ``host`` is the host as used for DNS and address checks: a lower-case
    punycode domain, a dotted IPv4 address, or an IPv6 address *without*
    brackets. ``port`` is the explicit port, or ``None`` when the URL uses
    the scheme's default port (see :attr:`effective_port`). ``host_key`` is
    ``scheme://authority`` with IPv6 bracketed and ``:port`` only when not
    the default. ``url`` always starts with ``host_key``.
    """

    url: str
    scheme: str
    host: str
    port: int | None
    host_key: str
    url_key: bytes
    shard: int

    @property
    def path_and_query(self) -> str:
        """Path plus ``?query`` (if any), as robots.txt rules match it.

        Percent-encoding is exactly as in :attr:`url` (unreserved characters
        decoded, other escapes with upper-case hex). Always starts with ``/``.
        """
        return self.url[len(self.host_key) :]

    @property
    def effective_port(self) -> int:
        """The TCP port to connect to (the scheme's default when ``port`` is None)."""
        return self.port if self.port is not None else _DEFAULT_PORTS[self.scheme]


# Fast construction of the frozen dataclass: the generated ``__init__`` of a
# frozen class routes every field through ``object.__setattr__`` (≈2 µs for
# seven fields); writing the slot descriptors directly is ≈0.8 µs and yields
# an identical, equally immutable instance (equality, hash and repr unchanged).
_SLOT_SETTERS: tuple[Callable[[Any, Any], None], ...] = tuple(
    CanonicalUrl.__dict__[name].__set__
    for name in ("url", "scheme", "host", "port", "host_key", "url_key", "shard")
)
_set_url, _set_scheme, _set_host, _set_port, _set_host_key, _set_url_key, _set_shard = _SLOT_SETTERS


def _new_canonical(
    url: str, scheme: str, host: str, port: int | None, host_key: str, url_key: bytes, shard: int
) -> CanonicalUrl:
    """Build a :class:`CanonicalUrl` without the frozen-``__init__`` overhead."""
    obj: CanonicalUrl = object.__new__(CanonicalUrl)
    _set_url(obj, url)
    _set_scheme(obj, scheme)
    _set_host(obj, host)
    _set_port(obj, port)
    _set_host_key(obj, host_key)
    _set_url_key(obj, url_key)
    _set_shard(obj, shard)
    return obj


def make_url_key(host_key: str, url: str) -> bytes:
    """The 16-byte store key of a canonical URL.

    First 4 bytes: the big-endian ``xxh3_64`` digest of the host name of ``host_key``
    (:func:`server_of`, so keys of one server, whatever the scheme or port, are adjacent
    in a sorted index and share a shard); last 12 bytes: the first 12 bytes of the
    ``xxh3_128`` digest of ``url``. Deterministic across processes, machines and
    Python versions.
    """
    return server_key_prefix(host_key) + xxhash.xxh3_128_digest(url.encode())[:12]


def server_key_prefix(host_key: str) -> bytes:
    """The first 4 bytes of every ``url_key`` of ``host_key``'s server (its host name)."""
    return xxhash.xxh3_64_digest(server_of(host_key).encode())[:4]


def server_of(host_key: str) -> str:
    """The host name of a ``host_key`` (``scheme://authority``, or a bare authority):
    the unit of the politeness clock and of shard ownership. The scheme and port are
    dropped and an IPv6 address loses its brackets, as :attr:`CanonicalUrl.host`:
    ``https://a.example:8443`` → ``a.example``, ``http://[::1]:80`` → ``::1``."""
    _, sep, authority = host_key.partition("://")
    if not sep:
        authority = host_key
    if authority.startswith("["):
        close = authority.find("]")
        return authority[1:close] if close > 0 else authority[1:]
    return authority.partition(":")[0]


def shard_of(host_key: str, shard_count: int = SHARD_COUNT) -> int:
    """The shard owning ``host_key``: the leading bits of ``xxh3_64`` of its host name.

    ``shard_count`` must be a power of two; the shard is the top
    ``log2(shard_count)`` bits of the 64-bit digest of :func:`server_of`, so it equals
    :func:`shard_of_key` of any ``url_key`` of the host, and every scheme and port of
    one host name has the same shard (one owner for the server's politeness clock).
    Stable across processes and machines (never uses Python's ``hash()``).
    """
    bits = _shard_bits(shard_count)
    digest = xxhash.xxh3_64_intdigest(server_of(host_key).encode())
    return digest >> (64 - bits) if bits else 0


def shard_of_key(url_key: bytes, shard_count: int = SHARD_COUNT) -> int:
    """The shard of a 16-byte ``url_key``, read from its leading bits (no lookup needed)."""
    bits = _shard_bits(shard_count)
    return int.from_bytes(url_key[:4], "big") >> (32 - bits) if bits else 0


def _shard_bits(shard_count: int) -> int:
    if shard_count <= 0 or shard_count & (shard_count - 1):
        raise InvalidURL(f"shard_count must be a positive power of two, got {shard_count}")
    bits = shard_count.bit_length() - 1
    if bits > 32:
        raise InvalidURL(f"shard_count must be at most 2**32, got {shard_count}")
    return bits


def is_plain_absolute(raw: str) -> bool:
    """``raw`` is an absolute URL that ada's ``normalize_url`` returns unchanged."""
    if "xn--" in raw or "/." in raw:
        return False
    m = _PLAIN_ABSOLUTE.match(raw)
    if m is None:
        return False
    port = m.group(2)
    return port is None or (int(port) <= 65535 and port != ("443" if m.group(1) else "80"))


def _resolve(raw: str, base: str | None) -> str:
    """WHATWG-parse ``raw`` (against ``base``) into an ada href, or raise InvalidURL."""
    if len(raw) > MAX_URL_LENGTH and len(raw.strip(_C0_SPACE)) > MAX_URL_LENGTH:
        raise InvalidURL(f"URL is longer than {MAX_URL_LENGTH} characters ({len(raw)})")
    if base is None:
        # the part before the first "#" parses the same without it; canonicalize drops
        # the fragment, so a plain head is the answer as is
        cut = raw.find("#")
        head = raw if cut < 0 else raw[:cut]
        if is_plain_absolute(head):
            return head  # normalize_url would return it unchanged
    try:
        return normalize_url(raw) if base is None else join_url(base, raw)
    except ValueError:
        pass
    if not raw.strip(_C0_SPACE):
        raise InvalidURL("empty URL") from None
    if base is None:
        raise InvalidURL(
            f"not a valid absolute URL (WHATWG parsing failed, no base given): {raw[:200]!r}"
        ) from None
    raise InvalidURL(
        f"not a valid URL (WHATWG parsing failed against base {base[:200]!r}): {raw[:200]!r}"
    ) from None


def canonicalize(raw: str, base: str | None = None) -> CanonicalUrl:
    """Parse ``raw`` (resolved against ``base`` when given) into canonical form.

    Raises :class:`~courtier.core.errors.InvalidURL` when the input is empty,
    does not parse as a WHATWG URL, is not ``http``/``https``, or whose
    canonical form exceeds :data:`MAX_URL_LENGTH` characters. Never raises
    anything else for any ``str`` input. As in browsers, an empty ``raw``
    with a ``base`` resolves to the base itself (minus its fragment). Pure
    and thread-safe.
    """
    href = _resolve(raw, base)
    colon = href.find(":")
    scheme = href[:colon]
    if scheme not in _DEFAULT_PORTS:
        raise InvalidURL(
            f"unsupported scheme {scheme!r} in {raw[:200]!r}: only http and https are crawlable"
        )
    # Special-scheme hrefs are always "scheme://authority/path[?query][#fragment]";
    # '/', '?', '#' and '@' inside userinfo, path and query are percent-encoded.
    start = colon + 3
    path_start = href.find("/", start)
    if path_start < 0:  # defensive: ada always serialises a path for http(s)
        href += "/"
        path_start = len(href) - 1
    authority = href[start:path_start]
    at = authority.rfind("@")
    if at >= 0:
        authority = authority[at + 1 :]
    hash_pos = href.find("#", path_start)
    tail = href[path_start:] if hash_pos < 0 else href[path_start:hash_pos]
    if tail.endswith("?") and tail.find("?") == len(tail) - 1:
        tail = tail[:-1]
    if "%" in tail and _MAYBE_FIXABLE.search(tail) is not None:
        tail = _fix_escapes(tail)

    if authority.startswith("["):
        close = authority.find("]")
        host = authority[1:close]
        port_text = authority[close + 2 :]
    else:
        host, _, port_text = authority.partition(":")
    if not host:
        raise InvalidURL(f"URL has an empty host: {raw[:200]!r}")
    port = int(port_text) if port_text else None

    host_key = scheme + "://" + authority
    url = host_key + tail
    if len(url) > MAX_URL_LENGTH:
        raise InvalidURL(
            f"canonical URL is longer than {MAX_URL_LENGTH} characters ({len(url)}): {url[:200]!r}"
        )
    host_hash = xxhash.xxh3_64_intdigest(host.encode())  # the server: any scheme or port
    url_key = host_hash.to_bytes(8, "big")[:4] + xxhash.xxh3_128_digest(url.encode())[:12]
    shard = host_hash >> _SHARD_SHIFT
    return _new_canonical(url, scheme, host, port, host_key, url_key, shard)


def host_key_of(url: str) -> str:
    """The ``host_key`` of ``url`` (canonicalized first); raises InvalidURL like it."""
    return canonicalize(url).host_key


@functools.cache
def _suffix_list() -> PublicSuffixList:
    """The Public Suffix List shipped inside the ``publicsuffixlist`` wheel (loaded once).

    The same rule set as ``PublicSuffixList()``, built faster: that constructor adds the
    punycode form of every rule by running each of the ~10,000 rules through Python's
    ``idna`` codec (~70 ms, paid by every command that needs a registrable domain), yet
    only the ~460 non-ASCII rules have a punycode form that differs. Those are encoded
    here and given as extra lines, with the library's own encoding turned off
    (``tests/unit/test_urls.py`` checks that the rule sets are equal)."""
    from publicsuffixlist import PSLFILE, PublicSuffixList, encode_idn

    lines: list[str] = []
    with open(PSLFILE, encoding="utf-8") as source:
        for line in source:
            lines.append(line)
            rule = line.lower().split(" ")[0].rstrip()  # as the library reads a line
            if rule and not rule.startswith("//") and not rule.isascii():
                encoded = encode_idn(rule.lstrip("!"))
                lines.append(("!" + encoded if rule[0] == "!" else encoded) + "\n")
    return PublicSuffixList(lines, accept_encoded_idn=False)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=65_536)
def registrable_domain(host: str) -> str:
    """The registrable domain (eTLD+1) of ``host``, for the seeds-domains scope.

    Uses the Public Suffix List bundled with the ``publicsuffixlist`` package
    (no network), *including* its private section, so ``a.b.github.io`` maps
    to ``b.github.io`` and ``www.example.co.uk`` to ``example.co.uk``.
    Input is lower-cased and a trailing dot ignored; give punycode (as
    :attr:`CanonicalUrl.host` is). IP addresses (IPv6 with or without
    brackets) are returned unchanged. A host that is itself a public suffix
    or a single label (``com``, ``github.io``, ``localhost``) is returned
    as is. Unknown TLDs are treated as one-label suffixes.
    """
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if _is_ip(bare):
        return host
    name = host.lower().rstrip(".")
    if not name:
        return host
    found = _suffix_list().privatesuffix(name)
    return found if found is not None else name
