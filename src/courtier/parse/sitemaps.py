"""Sitemaps (sitemaps.org 0.9): XML urlsets and indexes, plain text, RSS and Atom feeds.

:func:`parse_sitemap` never raises on bad input: whatever could be read is
returned, and every problem is a line in ``SitemapResult.errors``.

Formats, detected from the content (not from the URL or Content-Type):

* gzip (magic bytes ``1f 8b``) is decompressed first, at most ``max_bytes``
  of output (a decompression bomb stops there, ``truncated=True``);
* a leading UTF-8 byte-order mark is ignored;
* XML whose root is ``urlset`` → :attr:`SitemapResult.urls`; ``sitemapindex``
  → :attr:`SitemapResult.sitemaps`; ``rss``/``rdf:RDF`` → each ``item``'s
  ``link`` (``pubDate`` as lastmod); ``feed`` (Atom) → each ``entry``'s
  first ``link`` without ``rel`` or with ``rel="alternate"`` (``updated`` as
  lastmod). Namespaces are tolerated: elements match by local name, so
  prefixed (``sit:url``) and wrongly namespaced sitemaps are read; only
  *direct* children of ``url``/``sitemap`` in the parent's namespace (or
  none) count, so ``image:loc`` and ``video:*`` extensions are ignored. A
  ``<sitemap>`` without ``<loc>`` but with a URL as its text is accepted;
* anything else is a plain-text sitemap: one URL per line, blank lines
  skipped.

XML is parsed with defusedxml: any DTD (``<!DOCTYPE``), entity declaration
or external reference is refused (billion laughs, XXE), as an error.
Parsing is incremental and each finished entry is dropped from the tree,
so memory stays proportional to one entry; a document broken half-way
keeps the entries before the break.

Limits: at most ``max_urls`` entries (URLs plus child sitemaps; the
protocol's 50,000) and ``max_bytes`` of (decompressed) input (the
protocol's 50 MiB); beyond either the result is cut and ``truncated``.

Scope: a ``loc`` must be an absolute http(s) URL and, unless
``allow_cross_host=True`` (e.g. a sitemap cross-submitted by the other
host's robots.txt), have the same ``host_key`` (scheme, host, port) as the
sitemap's URL. The protocol also limits URLs to the sitemap's directory;
that rule is **not** applied by default, because sitemaps listed in
robots.txt may cover the whole host (as the large search engines accept)
and many sites keep them under ``/sitemaps/``; ``strict_path=True``
enforces it. ``loc`` values are returned in canonical form
(:func:`courtier.urls.canonicalize`).
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse

from courtier.errors import InvalidURL
from courtier.urls import CanonicalUrl, canonicalize

__all__ = ["CHANGEFREQS", "SitemapEntry", "SitemapResult", "parse_lastmod", "parse_sitemap"]

CHANGEFREQS = frozenset({"always", "hourly", "daily", "weekly", "monthly", "yearly", "never"})
MAX_ERRORS = 100  # errors listed one by one; the rest are counted in a last line
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """One URL of a sitemap: canonical ``loc`` and the optional hints (epoch seconds)."""

    loc: str
    lastmod: float | None = None
    changefreq: str | None = None
    priority: float | None = None


@dataclass(slots=True)
class SitemapResult:
    """What one sitemap document listed."""

    urls: list[SitemapEntry] = field(default_factory=list)
    sitemaps: list[str] = field(default_factory=list)  # child sitemaps of an index
    errors: list[str] = field(default_factory=list)
    truncated: bool = False
    kind: str = "unknown"  # "urlset", "sitemapindex", "rss", "atom", "text"
    _dropped_errors: int = 0

    def error(self, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(message)
            return
        self._dropped_errors += 1
        summary = f"… and {self._dropped_errors} more errors"
        if self._dropped_errors == 1:
            self.errors.append(summary)
        else:
            self.errors[-1] = summary


def parse_lastmod(text: str) -> float | None:
    """W3C Datetime (``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD``, with time and zone) or an
    RFC 822 date (RSS) as epoch seconds; no zone means UTC. None when unreadable."""
    value = text.strip()
    if not value:
        return None
    try:
        if len(value) == 4 and value.isdigit():
            return datetime(int(value), 1, 1, tzinfo=UTC).timestamp()
        if len(value) == 7 and value[4] == "-":
            return datetime(int(value[:4]), int(value[5:]), 1, tzinfo=UTC).timestamp()
        parsed = datetime.fromisoformat(value)
    except ValueError:
        try:
            parsed = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


class _Scope:
    """Checks a ``loc`` against the sitemap's own URL."""

    def __init__(self, url: str, allow_cross_host: bool, strict_path: bool) -> None:
        self.allow_cross_host = allow_cross_host
        self.strict_path = strict_path
        try:
            base: CanonicalUrl | None = canonicalize(url)
        except InvalidURL:
            base = None
        self.host_key = None if base is None else base.host_key
        prefix = "" if base is None else base.url.split("?", 1)[0]
        self.dir_prefix = prefix[: prefix.rfind("/") + 1]

    def check(self, raw: str, result: SitemapResult, where: str = "") -> str | None:
        """The canonical loc, or None after adding an error (prefixed with ``where``)."""
        loc = raw.strip()
        if not loc:
            result.error(f"{where}empty loc")
            return None
        try:
            canon = canonicalize(loc)
        except InvalidURL as exc:
            result.error(f"{where}invalid loc {loc[:200]!r}: {str(exc)[:200]}")
            return None
        if not self.allow_cross_host and canon.host_key != self.host_key:
            result.error(f"{where}cross-host loc refused: {canon.url[:200]}")
            return None
        if self.strict_path and not canon.url.startswith(self.dir_prefix):
            result.error(f"{where}loc outside the sitemap's directory refused: {canon.url[:200]}")
            return None
        return canon.url


def _gunzip(body: bytes, max_bytes: int, result: SitemapResult) -> bytes:
    """Decompress (all members of) a gzip body, keeping at most ``max_bytes``."""
    out = bytearray()
    data = body
    while data:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(data, max_bytes + 1 - len(out))
        except zlib.error as exc:
            result.error(f"gzip: {exc}")
            break
        if len(out) > max_bytes:
            result.truncated = True
            result.error(f"decompressed sitemap exceeds {max_bytes} bytes; cut")
            return bytes(out[:max_bytes])
        if not inflater.eof:
            result.error("gzip: truncated stream")
            break
        data = inflater.unused_data
        if data and not data.startswith(_GZIP_MAGIC):
            break  # trailing garbage after the last member
    return bytes(out)


def _local(tag: str) -> tuple[str, str]:
    """(namespace, local name) of an ElementTree tag."""
    if tag.startswith("{"):
        ns, _, local = tag[1:].partition("}")
        return ns, local
    return "", tag


def _child_texts(elem: Element) -> dict[str, str]:
    """Direct children in ``elem``'s namespace (or none): local name → text (first wins)."""
    own_ns, _ = _local(elem.tag)
    texts: dict[str, str] = {}
    for child in elem:
        if not isinstance(child.tag, str):
            continue
        ns, name = _local(child.tag)
        if ns in ("", own_ns) and name not in texts:
            texts[name] = (child.text or "").strip()
    return texts


def _first_feed_link(entry: Element) -> str | None:
    for child in entry:
        if isinstance(child.tag, str) and _local(child.tag)[1] == "link":
            rel = child.get("rel", "alternate")
            href = child.get("href")
            if href and rel == "alternate":
                return href
    return None


class _XmlReader:
    """Turns finished XML elements into entries of one :class:`SitemapResult`."""

    def __init__(self, scope: _Scope, result: SitemapResult, max_urls: int) -> None:
        self.scope, self.result, self.max_urls = scope, result, max_urls

    def full(self) -> bool:
        result = self.result
        if len(result.urls) + len(result.sitemaps) >= self.max_urls:
            result.truncated = True
            result.error(f"more than {self.max_urls} entries; cut")
            return True
        return False

    def entry(self, elem: Element, name: str) -> None:
        """Handle one finished element named ``name`` (local name)."""
        kind, result = self.result.kind, self.result
        if kind == "urlset" and name == "url":
            texts = _child_texts(elem)
            loc = self.scope.check(texts.get("loc", ""), result)
            if loc is not None:
                result.urls.append(self._entry(loc, texts))
        elif kind == "sitemapindex" and name == "sitemap":
            texts = _child_texts(elem)
            raw = texts.get("loc") or (elem.text or "").strip()
            loc = self.scope.check(raw, result)
            if loc is not None:
                result.sitemaps.append(loc)
        elif kind == "rss" and name == "item":
            texts = _child_texts(elem)
            loc = self.scope.check(texts.get("link", ""), result)
            if loc is not None:
                lastmod = parse_lastmod(texts.get("pubDate", ""))
                result.urls.append(SitemapEntry(loc, lastmod))
        elif kind == "atom" and name == "entry":
            href = _first_feed_link(elem)
            loc = self.scope.check(href or "", result)
            if loc is not None:
                lastmod = parse_lastmod(_child_texts(elem).get("updated", ""))
                result.urls.append(SitemapEntry(loc, lastmod))

    def _entry(self, loc: str, texts: dict[str, str]) -> SitemapEntry:
        lastmod = None
        if texts.get("lastmod"):
            lastmod = parse_lastmod(texts["lastmod"])
            if lastmod is None:
                self.result.error(f"bad lastmod {texts['lastmod'][:50]!r} for {loc[:200]}")
        changefreq = texts.get("changefreq", "").lower() or None
        if changefreq is not None and changefreq not in CHANGEFREQS:
            self.result.error(f"bad changefreq {changefreq[:50]!r} for {loc[:200]}")
            changefreq = None
        priority = None
        if texts.get("priority"):
            try:
                priority = float(texts["priority"])
            except ValueError:
                priority = None
            if priority is None or not 0.0 <= priority <= 1.0:
                self.result.error(f"bad priority {texts['priority'][:50]!r} for {loc[:200]}")
                priority = None
        return SitemapEntry(loc, lastmod, changefreq, priority)


_ROOT_KINDS = {
    "urlset": "urlset",
    "sitemapindex": "sitemapindex",
    "rss": "rss",
    "RDF": "rss",
    "feed": "atom",
}
_ENTRY_NAMES = {"urlset": "url", "sitemapindex": "sitemap", "rss": "item", "atom": "entry"}


def _events(data: bytes) -> Iterator[tuple[str, Element]]:
    events = iterparse(io.BytesIO(data), events=("start", "end"), forbid_dtd=True)
    return (event for event in events)  # narrow the stub's Iterator[tuple[str, Any]]


def _parse_xml(data: bytes, reader: _XmlReader) -> None:
    result = reader.result
    stack: list[Element] = []
    try:
        for event, elem in _events(data):
            if event == "start":
                if not stack:
                    result.kind = _ROOT_KINDS.get(_local(elem.tag)[1], "unknown")
                    if result.kind == "unknown":
                        result.error(f"unknown XML root element {_local(elem.tag)[1]!r}")
                        return
                stack.append(elem)
                continue
            stack.pop()
            name = _local(elem.tag)[1]
            if name != _ENTRY_NAMES[result.kind]:
                continue
            if len(stack) != 1 and result.kind in ("urlset", "sitemapindex"):
                continue  # only direct children of the root are entries
            if reader.full():
                return
            reader.entry(elem, name)
            elem.clear()
            if stack:
                stack[-1].remove(elem)
    except DefusedXmlException as exc:
        result.error(f"refused XML: {type(exc).__name__} (DTDs and entities are not allowed)")
    except ParseError as exc:
        result.error(f"XML: {exc}")


def _parse_text(data: bytes, scope: _Scope, result: SitemapResult, max_urls: int) -> None:
    result.kind = "text"
    text = data.decode("utf-8", "replace")
    # only CR, LF and CRLF end a line (str.splitlines would also split at VT, FF, NEL…)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line:
            continue
        if len(result.urls) >= max_urls:
            result.truncated = True
            result.error(f"more than {max_urls} entries; cut")
            return
        loc = scope.check(line, result, f"line {number}: ")
        if loc is not None:
            result.urls.append(SitemapEntry(loc))


def parse_sitemap(
    body: bytes,
    url: str,
    max_urls: int = 50_000,
    max_bytes: int = 50 * 1024 * 1024,
    *,
    allow_cross_host: bool = False,
    strict_path: bool = False,
) -> SitemapResult:
    """Parse a sitemap, sitemap index, text sitemap or feed fetched from ``url``.

    Never raises for any ``body``; see the module docstring for formats,
    limits and the scope rule. ``url`` is the sitemap's final URL (after
    redirects); if it is not a valid http(s) URL, every loc is refused
    unless ``allow_cross_host``.
    """
    result = SitemapResult()
    scope = _Scope(url, allow_cross_host, strict_path)
    data = body
    if data.startswith(_GZIP_MAGIC):
        data = _gunzip(data, max_bytes, result)
    elif len(data) > max_bytes:
        result.truncated = True
        result.error(f"sitemap exceeds {max_bytes} bytes; cut")
        data = data[:max_bytes]
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    head = data[:512].lstrip()
    if head.startswith(b"<"):
        _parse_xml(data, _XmlReader(scope, result, max_urls))
    else:
        _parse_text(data, scope, result, max_urls)
    return result
