"""HTML page parsing: out-links, ``<base>``, robots directives, canonical, title, text.

One call, :func:`parse_html`, turns a fetched body into a :class:`ParsedPage`.
It uses selectolax's Lexbor parser (a WHATWG-conformant HTML5 tree builder), so
malformed markup is repaired the way a browser would repair it. The function
never raises: invalid UTF-8, binary junk and unparseable URLs only cost links.

Link rules (the contract):

- links come from ``a[href]``, ``area[href]``, ``frame[src]``, ``iframe[src]``
  and ``link[href]`` whose ``rel`` has ``alternate``, ``next`` or ``prev``
  (never ``stylesheet`` or ``icon``, even as ``rel="alternate stylesheet"``);
- each value is stripped of leading/trailing C0 controls and spaces; empty and
  fragment-only (``#…``) values are skipped;
- it is resolved (WHATWG, via ada-url; plain refs by an equivalent,
  property-tested concatenation) against the document base URL: the first
  ``<base href>`` resolved against the page URL when that gives an http(s)
  URL, else the page URL;
- only absolute ``http``/``https`` results are kept, which drops
  ``javascript:``, ``mailto:``, ``tel:``, ``data:`` and every other scheme;
- links are listed by kind (``link``, ``a``, ``area``, ``frame``, ``iframe``),
  each kind in document order; links inside ``<noscript>`` count (the page is
  parsed as with scripting off), those inside ``<template>`` do not;
- URLs are *not* canonicalized here (fragments are kept); duplicates are
  folded, keeping the first position, and a URL is ``nofollow`` only if every
  occurrence carries ``rel=nofollow``; at most ``max_links`` are returned.

Robots directives: ``<meta name="robots">`` and ``<meta name="{agent_token}">``
(names case-insensitive), and the ``X-Robots-Tag`` header (see
:func:`robots_directives`), with the tokens ``noindex``, ``nofollow`` and
``none`` (= both). **A nofollow page returns no links at all**; ``canonical``
is still reported.

``canonical`` is the first ``<link rel=canonical>`` that resolves to an http(s)
URL (None past :data:`~courtier.parse.caps.MAX_CANONICAL_CHARS`); ``title``
the first ``<title>``'s text with whitespace collapsed, at most
:data:`~courtier.parse.caps.MAX_TITLE_CHARS` characters (None when absent or
blank).

For the indexer feed each link also carries its anchor text (the ``<a>``'s
text, an ``<area>``'s ``alt``; whitespace collapsed, at most
:data:`MAX_ANCHOR_CHARS`; the first non-empty one when a URL is folded) and
its ``rel`` (of the first occurrence). ``lang`` is ``<html lang>`` and
``robots_meta`` the raw content of the robots ``<meta>`` tags that apply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from ada_url import join_url, normalize_url
from selectolax.lexbor import LexborHTMLParser

from courtier.core.urls import is_plain_absolute
from courtier.parse.caps import MAX_CANONICAL_CHARS, MAX_TITLE_CHARS
from courtier.parse.charset import prepare_html
from courtier.parse.robots_tags import directive_flags, robots_directives

__all__ = [
    "PARSER_VERSION", "UNICODE_SPACES", "Link", "ParsedPage", "collapse_whitespace",
    "parse_html", "parse_page_words", "robots_directives", "words_text",
]

#: version of the link and directive rules above; bump it when they change, and
#: ``courtier reparse`` re-parses every capture once more under the new number
PARSER_VERSION = 1

#: (tag, URL attribute) in the order links are reported
_LINK_SOURCES = (
    ("link", "href"),
    ("a", "href"),
    ("area", "href"),
    ("frame", "src"),
    ("iframe", "src"),
)
_C0_SPACE = "".join(chr(i) for i in range(0x21))
_SKIP_SCHEMES = ("javascript:", "mailto:", "tel:", "data:")
_NO_RELS: frozenset[str] = frozenset()
_LINK_RELS = frozenset({"alternate", "next", "prev"})
_NOT_PAGE_RELS = frozenset({"stylesheet", "icon"})
_NOT_TEXT_TAGS = ["script", "style", "noscript", "template"]
#: anchor texts are cut to this many characters
MAX_ANCHOR_CHARS = 256
_NEXT_SPACE = re.compile(r"\s")
#: the characters above ASCII that ``str.split()`` splits on (``str.isspace()``; a test
#: checks the list against every code point)
UNICODE_SPACES = ("\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                  "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_UNICODE_SPACE = re.compile(f"[{UNICODE_SPACES}]")
# characters that WHATWG URL serialisation copies verbatim in path, query and fragment
_PLAIN_REF = re.compile(r"[A-Za-z0-9\-._~/?=&%+,;:@!$()*#]+\Z")


class Link(NamedTuple):
    """One out-link: absolute (not canonicalized) URL and where it came from (a named
    tuple: ~50 a page, 3× cheaper to build than a frozen dataclass)."""

    url: str
    tag: str  # "a", "area", "link", "frame" or "iframe"
    rel: str  # the rel attribute, lower-cased, whitespace-collapsed ("" if none)
    nofollow: bool
    anchor: str = ""  # anchor text (a) or alt (area), whitespace collapsed, capped


@dataclass(slots=True)
class ParsedPage:
    """What the crawler keeps from one HTML page (see the module docstring).

    ``base_url`` is the URL links were resolved against; ``encoding`` the
    codec name the body was read with; ``meta_noindex``/``meta_nofollow``
    combine ``<meta>`` robots tags and the ``X-Robots-Tag`` header.
    """

    links: list[Link]
    base_url: str
    title: str | None
    canonical: str | None
    meta_noindex: bool
    meta_nofollow: bool
    encoding: str
    text: str = field(default="")
    lang: str | None = None          # <html lang>, as written (stripped)
    robots_meta: str | None = None   # content of the robots <meta> tags that apply, joined


def collapse_whitespace(raw: str, cap: int) -> str:
    """``" ".join(raw.split())`` truncated to ``cap`` chars, without splitting all of ``raw``."""
    parts: list[str] = []
    size = 0
    pos = 0
    n = len(raw)
    while pos < n and size < cap:
        end = min(n, pos + (cap - size) + 64)
        if end < n:
            m = _NEXT_SPACE.search(raw, end)
            end = m.start() if m is not None else n
        chunk = " ".join(raw[pos:end].split())
        if chunk:
            parts.append(chunk)
            size += len(chunk) + 1
        pos = end
    return " ".join(parts)[:cap].rstrip()


def words_text(visible: str, cap: int) -> str:
    """Text with the words of ``collapse_whitespace(visible, cap)``, for callers that only
    split it into words (SimHash), made without splitting: runs of whitespace are kept and
    the non-ASCII spaces become ``" "`` (SimHash separates words at ASCII characters only,
    and the collapse removes those spaces); over ``cap`` it is the collapsed text."""
    if len(visible) > cap:
        return collapse_whitespace(visible, cap)
    if visible.isascii():
        return visible
    return _UNICODE_SPACE.sub(" ", visible)


def _http_join(base: str, ref: str) -> str | None:
    """``ref`` resolved against ``base`` if that yields an http(s) URL, else None.

    An unparseable ``base`` (a bad page URL) still lets absolute refs through.
    """
    try:
        url = join_url(base, ref)
    except ValueError:
        try:
            url = normalize_url(ref)
        except ValueError:
            return None
    if url.startswith(("http://", "https://")):
        return url
    return None


class _Resolver:
    """Resolves references against one base URL, with a fast path for plain refs.

    Most hrefs are absolute paths (``/a/b?c=1``), plain relative paths
    (``page.html``), query-only refs or same-origin absolute URLs made of
    characters that WHATWG serialisation leaves untouched. For those, with no
    dot segment (``.``, ``..``, ``%2e``) in the path, the WHATWG result is plain
    concatenation onto the (ada-normalized) base, which is ~10× cheaper than a
    full parse; an absolute URL of another origin already in normal form
    (:func:`courtier.core.urls.is_plain_absolute`, before any fragment) is its own
    result; everything else goes through ada's ``join_url``. The fast path
    is property-tested against ``join_url``.
    """

    __slots__ = ("base", "directory", "origin", "origin_slash", "without_query")

    def __init__(self, base: str) -> None:
        self.base = base
        self.origin = self.origin_slash = self.directory = self.without_query = ""
        href = _http_join(base, "")
        if href is None:
            return  # no fast path: every ref goes to ada
        path_at = href.find("/", href.find("://") + 3)
        if path_at < 0:
            return
        self.origin = href[:path_at]
        self.origin_slash = self.origin + "/"
        cut = min((i for i in (href.find("?"), href.find("#")) if i >= 0), default=len(href))
        self.without_query = href[:cut]
        self.directory = href[: href.rfind("/", 0, cut) + 1]

    def __call__(self, ref: str) -> str | None:
        """The http(s) URL ``ref`` resolves to, or None."""
        if (
            self.origin
            and _PLAIN_REF.match(ref) is not None
            and "/." not in ref  # conservative: anywhere, not only in the path
            and "%2e" not in ref
            and "%2E" not in ref
        ):
            first = ref[0]
            if first == "?":
                return self.without_query + ref
            if first == "/":
                if ref[1:2] != "/":
                    return self.origin + ref
            elif ref.startswith(self.origin_slash):
                return ref
            elif first == "h" and ref.startswith(("http://", "https://")):
                cut = ref.find("#")  # an absolute URL ada would leave as it is (any host)
                if is_plain_absolute(ref if cut < 0 else ref[:cut]):
                    return ref
            elif first not in ".#" and ":" not in ref:
                return self.directory + ref
        return _http_join(self.base, ref)


def _link_target(value: str | None) -> str | None:
    """The reference to resolve, or None when the value is to be skipped."""
    if value is None:
        return None
    ref = value.strip(_C0_SPACE)
    if not ref or ref[0] == "#":
        return None
    head = ref[:11]
    if ":" in head and head.lower().startswith(_SKIP_SCHEMES):
        return None
    return ref


def _anchor(raw: str) -> str:
    """Anchor text: whitespace collapsed, at most :data:`MAX_ANCHOR_CHARS` characters."""
    if len(raw) <= MAX_ANCHOR_CHARS:
        return " ".join(raw.split())
    return collapse_whitespace(raw, MAX_ANCHOR_CHARS)


def _rel_tokens(rel: str | None) -> tuple[str, frozenset[str]]:
    """(normalized rel attribute, its set of lower-case tokens)."""
    if not rel:
        return "", _NO_RELS
    tokens = rel.lower().split()
    return " ".join(tokens), frozenset(tokens)


def parse_html(
    body: bytes,
    url: str,
    content_type: str | None = None,
    x_robots_tag: str | None = None,
    max_links: int = 10_000,
    max_text_chars: int = 200_000,
    agent_token: str = "courtier",
    *,
    want_text: bool = True,
    collapse_text: bool = True,
) -> ParsedPage:
    """Parse one HTML body fetched from ``url``; never raises.

    ``content_type`` is the HTTP header (its charset wins over ``<meta>``),
    ``x_robots_tag`` the (comma-joined) ``X-Robots-Tag`` header. The page's
    ``meta_noindex``/``meta_nofollow`` combine the meta tags and the header.
    ``text`` is the visible text (``script``, ``style``, ``noscript`` and
    ``template`` removed, text nodes joined by a space, whitespace collapsed,
    at most ``max_text_chars`` characters); it costs about as much as the rest
    of the parse, so ``want_text=False`` skips it and leaves ``text == ""``.
    ``collapse_text=False`` (for callers that only split the text into words,
    like SimHash) gives :func:`words_text` instead: the same words (and fingerprints),
    without the collapse's cost (a third of the whole parse on a 30-100 KB page).
    """
    markup, encoding = prepare_html(body, content_type)
    parser = LexborHTMLParser(markup)
    # parser.tags() is a cheap Lexbor lookup; the first css() on a parser costs
    # ~200 µs to set up its selector engine, more than the HTML parse itself.
    noindex, nofollow = robots_directives(x_robots_tag, agent_token)
    names = ("robots", agent_token.lower())
    robots_meta: list[str] = []
    for node in parser.tags("meta"):
        attrs = node.attributes
        name = attrs.get("name")
        if name and name.strip().lower() in names:
            content = attrs.get("content") or ""
            robots_meta.append(content.strip())
            ni, nf = directive_flags(content)
            noindex |= ni
            nofollow |= nf

    lang: str | None = None
    for node in parser.tags("html"):
        lang = (node.attributes.get("lang") or "").strip() or None
        break

    base_href: str | None = None
    for node in parser.tags("base"):
        attrs = node.attributes
        if "href" in attrs:
            base_href = attrs["href"] or ""
            break

    title: str | None = None
    for node in parser.tags("title"):
        title = collapse_whitespace(node.text(), MAX_TITLE_CHARS) or None
        break

    raw: list[tuple[str, str, str | None, str]] = []  # (tag, reference, rel, anchor)
    for tag, attr in _LINK_SOURCES:
        for node in parser.tags(tag):
            attrs = node.attributes
            value = attrs.get(attr)
            if value:
                if tag == "a":
                    anchor = _anchor(node.text())
                elif tag == "area":
                    anchor = _anchor(attrs.get("alt") or "")
                else:
                    anchor = ""
                raw.append((tag, value, attrs.get("rel"), anchor))

    base_url = url
    if base_href is not None:
        resolved = _http_join(url, base_href.strip(_C0_SPACE))
        if resolved is not None:
            base_url = resolved

    resolve = _Resolver(base_url)
    links: list[Link] = []
    index: dict[str, int] = {}  # url -> position in links
    memo: dict[str, str | None] = {}  # raw attribute value -> url (pages repeat links)
    canonical: str | None = None
    for tag, value, rel_attr, anchor in raw:
        if tag == "link":
            rel, rels = _rel_tokens(rel_attr)
            if canonical is None and "canonical" in rels:
                ref = _link_target(value)
                canonical = resolve(ref) if ref is not None else None
            if rels.isdisjoint(_LINK_RELS) or not rels.isdisjoint(_NOT_PAGE_RELS):
                continue
        elif nofollow or len(links) >= max_links:
            if canonical is not None:
                break
            continue
        else:
            rel, rels = _rel_tokens(rel_attr)
        if nofollow or len(links) >= max_links:
            continue
        if value in memo:
            target = memo[value]
        else:
            ref = _link_target(value)
            target = memo[value] = None if ref is None else resolve(ref)
        if target is None:
            continue
        follow_not = "nofollow" in rels
        at = index.get(target)
        if at is not None:
            old = links[at]
            if (old.nofollow and not follow_not) or (anchor and not old.anchor):
                links[at] = Link(old.url, old.tag, old.rel, old.nofollow and follow_not,
                                 old.anchor or anchor)
            continue
        index[target] = len(links)
        links.append(Link(target, tag, rel, follow_not, anchor))

    text = ""
    if want_text and max_text_chars > 0:
        parser.strip_tags(_NOT_TEXT_TAGS)
        root = parser.body or parser.root
        if root is not None:
            visible = root.text(separator=" ")
            text = (collapse_whitespace(visible, max_text_chars) if collapse_text
                    else words_text(visible, max_text_chars))

    if canonical is not None and len(canonical) > MAX_CANONICAL_CHARS:
        canonical = None
    return ParsedPage(
        links=links,
        base_url=base_url,
        title=title,
        canonical=canonical,
        meta_noindex=noindex,
        meta_nofollow=nofollow,
        encoding=encoding,
        text=text,
        lang=lang,
        robots_meta=", ".join(robots_meta) if robots_meta else None,
    )


def parse_page_words(body: bytes, url: str, content_type: str | None,
                     x_robots_tag: str | None, agent: str) -> ParsedPage:
    """:func:`parse_html` as the crawl calls it, inline or in a thread: its text only
    feeds SimHash, so it is :func:`words_text`, not collapsed (``collapse_text=False``)."""
    return parse_html(body, url, content_type, x_robots_tag, agent_token=agent,
                      want_text=True, collapse_text=False)
