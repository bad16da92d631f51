"""A pure model of one host full of crawler traps, plus a breadth-first crawl over it.

``TrapSite.page(path_and_query)`` returns the page a server would send: a
status and the HTML body (links relative or absolute, anchor texts that do
not repeat the session ids or filter values of their targets). Pure: no
sockets, so a crawl of thousands of pages takes about a second.

Areas of the site:

* ``/`` and ``/p/1`` … ``/p/50`` — ordinary pages (distinct content), linked
  from the home page and to their neighbours;
* ``/cal/YYYY/MM`` — an infinite calendar: every month links to the previous
  and the next month, forever;
* ``/loop/`` — relative links ``a/`` and ``x/y/`` resolve deeper and deeper
  (``/loop/a/a/…``, ``/loop/x/y/x/y/…``);
* ``/s/N?sid=…`` — twenty pages, every link carrying a fresh session id;
* ``/shop?color=…&size=…&sort=…`` — a multi-select facet explosion
  (2^6 × 2^4 × 3 combinations over twelve products).
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from courtier.archive.warc_fields import sha256_digest
from courtier.core.errors import InvalidURL
from courtier.core.urls import CanonicalUrl, canonicalize
from courtier.dedup.simhash import simhash64
from courtier.frontier.traps import TemplateTracker, TrapRules, static_trap_reason
from courtier.parse.html import parse_html

HOST = "http://trap.test"
COLORS = ("red", "blue", "green", "black", "white", "pink")
SIZES = ("s", "m", "l", "xl")
SORTS = ("price", "name", "new")
PRODUCTS = [(f"item{i}", COLORS[i % 6], SIZES[i % 4]) for i in range(12)]
ORDINARY = 50


@dataclass(frozen=True, slots=True)
class Page:
    status: int
    body: bytes


def _html(title: str, text: str, links: list[tuple[str, str]]) -> Page:
    """An HTML page; ``links`` are (href, anchor text) pairs."""
    anchors = "".join(f'<a href="{href}">{label}</a>\n' for href, label in links)
    body = f"<html><head><title>{title}</title></head><body><p>{text}</p>\n{anchors}</body></html>"
    return Page(200, body.encode())


def _sid(seed: str, n: int) -> str:
    return hashlib.sha1(f"{seed}/{n}".encode()).hexdigest()[:20]


def _shop_url(colors: frozenset[str], sizes: frozenset[str], sort: str) -> str:
    color = ",".join(c for c in COLORS if c in colors) or "any"
    size = ",".join(s for s in SIZES if s in sizes) or "any"
    return f"/shop?color={color}&size={size}&sort={sort}"


def _shop(query: str) -> Page:
    params = parse_qs(query)
    colors = frozenset(c for v in params.get("color", []) for c in v.split(",") if c in COLORS)
    sizes = frozenset(s for v in params.get("size", []) for s in v.split(",") if s in SIZES)
    sort = params.get("sort", ["price"])[0]
    sort = sort if sort in SORTS else "price"
    items = [
        name
        for name, color, size in PRODUCTS
        if (not colors or color in colors) and (not sizes or size in sizes)
    ]
    items.sort(reverse=sort == "new")
    links = [(_shop_url(colors ^ {c}, sizes, sort), c) for c in COLORS]
    links += [(_shop_url(colors, sizes ^ {s}, sort), s) for s in SIZES]
    links += [(_shop_url(colors, sizes, s), f"sort by {s}") for s in SORTS if s != sort]
    return _html("Shop", " ".join(items) or "no products match", links)


class TrapSite:
    """Pages of the trap host, by path and query (pure and deterministic)."""

    def page(self, path_and_query: str) -> Page:
        path, _, query = path_and_query.partition("?")
        parts = [p for p in path.split("/") if p]
        if path == "/":
            links = [(f"/p/{n}", f"product {n}") for n in range(1, ORDINARY + 1)]
            links += [("/cal/2026/11", "calendar"), ("/loop/", "files"), ("/shop", "shop")]
            links += [(f"/s/1?sid={_sid('home', 1)}", "members")]
            return _html("Home", "welcome", links)
        if len(parts) == 2 and parts[0] == "p" and parts[1].isdigit():
            n = int(parts[1])
            if 1 <= n <= ORDINARY:
                near = [(f"/p/{m}", "neighbour") for m in (n - 1, n + 1) if 1 <= m <= ORDINARY]
                return _html(f"Product {n}", f"product number {n} " * 3, [("/", "home"), *near])
        if len(parts) == 3 and parts[0] == "cal" and parts[1].isdigit() and parts[2].isdigit():
            year, month = int(parts[1]), int(parts[2])
            if 1 <= month <= 12:
                prev = (year, month - 1) if month > 1 else (year - 1, 12)
                nxt = (year, month + 1) if month < 12 else (year + 1, 1)
                links = [
                    (f"/cal/{y}/{m:02d}", label) for (y, m), label in ((prev, "<"), (nxt, ">"))
                ]
                return _html(f"Calendar {year}-{month:02d}", "no events this month", links)
        if parts and parts[0] == "loop" and path.endswith("/"):
            return _html("Loop", f"directory {path}", [("a/", "a"), ("x/y/", "x/y"), ("/", "home")])
        if len(parts) == 2 and parts[0] == "s" and parts[1].isdigit() and 1 <= int(parts[1]) <= 20:
            links = [(f"/s/{m}?sid={_sid(path_and_query, m)}", f"page {m}") for m in range(1, 21)]
            return _html(f"Session page {parts[1]}", "members area", links)
        if path == "/shop":
            return _shop(query)
        return Page(404, b"not found")


@dataclass(slots=True)
class CrawlResult:
    """What a bounded breadth-first crawl of the trap host admitted and fetched."""

    admitted: list[str] = field(default_factory=list)
    fetched: list[str] = field(default_factory=list)
    static_rejects: dict[str, int] = field(default_factory=dict)
    template_rejects: int = 0

    def count(self, predicate: Callable[[str], bool]) -> int:
        return sum(1 for url in self.admitted if predicate(url))


def bfs_crawl(
    fetch: Callable[[str], Page],
    tracker: TemplateTracker,
    rules: TrapRules,
    max_fetches: int = 5000,
    use_simhash: bool = True,
) -> CrawlResult:
    """Crawl ``HOST`` breadth-first the way intake would: every discovered link
    passes :func:`static_trap_reason` and ``tracker.admit``; every OK page is
    reported with ``tracker.observe_fetched`` — its fingerprint is the SimHash
    of the visible text (or, with ``use_simhash=False``, the SHA-256 payload
    digest). Links come from the real HTML parser. Stops when nothing is left or
    after ``max_fetches`` pages (the crawl is bounded whatever the rules do)."""
    result = CrawlResult()
    seed = canonicalize(HOST + "/")
    seen = {seed.url_key}
    queue: deque[tuple[CanonicalUrl, int]] = deque([(seed, 0)])
    result.admitted.append(seed.path_and_query)
    while queue and len(result.fetched) < max_fetches:
        url, depth = queue.popleft()
        page = fetch(url.path_and_query)
        result.fetched.append(url.path_and_query)
        if page.status != 200:
            continue
        parsed = parse_html(page.body, url.url, "text/html; charset=utf-8")
        fingerprint = simhash64(parsed.text) if use_simhash else sha256_digest(page.body)
        tracker.observe_fetched(url.host_key, tracker.template_of(url), fingerprint)
        for found in parsed.links:
            try:
                link = canonicalize(found.url)
            except InvalidURL:
                continue
            if link.url_key in seen:
                continue
            reason = static_trap_reason(link, depth + 1, rules)
            if reason is not None:
                result.static_rejects[reason] = result.static_rejects.get(reason, 0) + 1
                continue
            if not tracker.admit(link.host_key, link, depth + 1).admitted:
                result.template_rejects += 1
                continue
            seen.add(link.url_key)
            result.admitted.append(link.path_and_query)
            queue.append((link, depth + 1))
    return result
