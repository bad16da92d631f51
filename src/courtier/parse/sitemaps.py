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
Parsing is incremental from a stream (gzip is inflated 64 KiB at a time)
and every element is dropped from the tree when it ends — entries once
read, anything else at once, and an entry keeps only the fields it is read
for (at most :data:`MAX_ENTRY_CHILDREN`) — so memory stays proportional to one entry
whatever the document holds (millions of unknown elements included); a
document broken half-way keeps the entries before the break. With
``time_budget`` the parse stops itself when the budget is spent
(``truncated``, an error line); it is meant to run in a worker thread.

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
(:func:`courtier.core.urls.canonicalize`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse

from courtier.core.errors import InvalidURL
from courtier.core.urls import CanonicalUrl, canonicalize
from courtier.parse.sitemap_source import SitemapSource

__all__ = ["CHANGEFREQS", "SitemapEntry", "SitemapResult", "parse_lastmod", "parse_sitemap"]

CHANGEFREQS = frozenset({"always", "hourly", "daily", "weekly", "monthly", "yearly", "never"})
MAX_ERRORS = 100  # errors listed one by one; the rest are counted in a last line
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
    #: why the entries stop where they do (the first cut: the entry cap, the size cap
    #: once decompressed, the time budget); None when the document was read to its end
    cut_reason: str | None = None
    kind: str = "unknown"  # "urlset", "sitemapindex", "rss", "atom", "text"
    _dropped_errors: int = 0

    def cut(self, reason: str) -> None:
        """The entries stop here for ``reason`` (kept even when the error lines are full)."""
        self.truncated = True
        if self.cut_reason is None:
            self.cut_reason = reason
        self.error(f"{reason}; cut")

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
            result.cut(f"more than {self.max_urls} entries")
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


#: fields of an entry kept until it ends (the first 16; any other child is dropped at once)
MAX_ENTRY_CHILDREN = 16
_ENTRY_FIELDS = frozenset({"loc", "lastmod", "changefreq", "priority", "link", "pubDate",
                           "updated"})
_CHECK_EVERY = 4096  # events (or text lines) between two looks at the clock


class _Budget:
    """A time budget checked every few thousand steps (the parse runs in a thread,
    which cannot be killed: it stops itself)."""

    def __init__(self, seconds: float | None, result: SitemapResult) -> None:
        self.deadline = None if seconds is None else time.monotonic() + seconds
        self.seconds, self.result, self.steps = seconds, result, 0

    def spent(self) -> bool:
        self.steps += 1
        if self.deadline is None or self.steps % _CHECK_EVERY or time.monotonic() < self.deadline:
            return False
        self.result.cut(f"parse time budget of {self.seconds:g} s spent")
        return True


def _events(source: SitemapSource) -> Iterator[tuple[str, Element]]:
    events = iterparse(source, events=("start", "end"), forbid_dtd=True)
    return (event for event in events)  # narrow the stub's Iterator[tuple[str, Any]]


def _parse_xml(source: SitemapSource, reader: _XmlReader, budget: _Budget) -> None:
    """Entries as they end; every other element is dropped when it ends (an entry keeps
    at most :data:`MAX_ENTRY_CHILDREN` direct children), so memory holds one entry."""
    result = reader.result
    stack: list[Element] = []
    entry_at: int | None = None  # depth of the entry being read
    kept = 0
    try:
        for event, elem in _events(source):
            if budget.spent():
                return
            if event == "start":
                if not stack:
                    result.kind = _ROOT_KINDS.get(_local(elem.tag)[1], "unknown")
                    if result.kind == "unknown":
                        result.error(f"unknown XML root element {_local(elem.tag)[1]!r}")
                        return
                elif (entry_at is None and _local(elem.tag)[1] == _ENTRY_NAMES[result.kind]
                      and (len(stack) == 1 or result.kind in ("rss", "atom"))):
                    entry_at, kept = len(stack), 0  # urlset/sitemapindex: direct children only
                stack.append(elem)
                continue
            stack.pop()
            depth = len(stack)
            if depth == entry_at:
                entry_at = None
                if reader.full():
                    return
                reader.entry(elem, _local(elem.tag)[1])
            elif (entry_at is not None and depth == entry_at + 1 and kept < MAX_ENTRY_CHILDREN
                  and _local(elem.tag)[1] in _ENTRY_FIELDS):
                kept += 1
                continue  # a field of the entry, read when the entry ends
            elem.clear()
            if stack:
                stack[-1].remove(elem)
    except DefusedXmlException as exc:
        result.error(f"refused XML: {type(exc).__name__} (DTDs and entities are not allowed)")
    except ParseError as exc:
        result.error(f"XML: {exc}")


def _parse_text(data: bytes, scope: _Scope, result: SitemapResult, max_urls: int,
                budget: _Budget) -> None:
    result.kind = "text"
    text = data.decode("utf-8", "replace")
    # only CR, LF and CRLF end a line (str.splitlines would also split at VT, FF, NEL…)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for number, line in enumerate(lines, start=1):
        if budget.spent():
            return
        line = line.strip()
        if not line:
            continue
        if len(result.urls) >= max_urls:
            result.cut(f"more than {max_urls} entries")
            return
        loc = scope.check(line, result, f"line {number}: ")
        if loc is not None:
            result.urls.append(SitemapEntry(loc))


#: the protocol's limits of one sitemap file: URLs, and bytes once decompressed
MAX_SITEMAP_URLS = 50_000
MAX_SITEMAP_BYTES = 50 * 1024 * 1024


def parse_sitemap(
    body: bytes,
    url: str,
    max_urls: int = MAX_SITEMAP_URLS,
    max_bytes: int = MAX_SITEMAP_BYTES,
    *,
    allow_cross_host: bool = False,
    strict_path: bool = False,
    time_budget: float | None = None,
) -> SitemapResult:
    """Parse a sitemap, sitemap index, text sitemap or feed fetched from ``url``.

    Never raises for any ``body``; see the module docstring for formats,
    limits and the scope rule. ``url`` is the sitemap's final URL (after
    redirects); if it is not a valid http(s) URL, every loc is refused
    unless ``allow_cross_host``. ``time_budget`` (seconds) cuts the parse
    (``truncated``, the entries read so far kept) when it runs out.
    """
    result = SitemapResult()
    scope = _Scope(url, allow_cross_host, strict_path)
    budget = _Budget(time_budget, result)
    source = SitemapSource(body, max_bytes, result)
    if source.peek(len(_BOM)) == _BOM:
        source.skip(len(_BOM))
    head = source.peek(512).lstrip()
    if head.startswith(b"<"):
        _parse_xml(source, _XmlReader(scope, result, max_urls), budget)
    else:
        _parse_text(source.read(), scope, result, max_urls, budget)
    return result
