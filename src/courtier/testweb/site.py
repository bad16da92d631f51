"""The deterministic site model of the test web (pure: no I/O, no clock).

:class:`TestWeb` answers ``page(host, path_qs)`` for every virtual host of a
:class:`~courtier.testweb.spec.WebSpec` once the server port is known. The
same spec, port and seed always give the same bytes.

URL space of every host::

    /robots.txt               per the host's robots flavour
    /robots-real.txt          ("redirect", "redirect_chain") the real file /robots.txt leads to
    /robots-hop/1, /2         ("redirect_chain") 302 and 307 hops towards /robots-real.txt
    /robots-loop/a, /b        ("redirect_loop") 302 to each other, for ever
    /                         index
    /p/{i}.html               pages 0 … pages-1; links in many equivalent spellings
    /r/{i}                    301 → /p/{i}.html
    /loop/a, /loop/b          302 to each other
    /missing/{i}.html         404
    /files/{i}.pdf            application/pdf
    /img/{i}.png              image/png (a valid 1×1 PNG)
    /p/{i}.html?utm_source=…  (tracking_links) the index and every page also link pages
                              with tracking parameters (utm_*, fbclid, gclid), whose
                              oracle target is the page without them, and the index
                              links /p/0.html?v=2 (a parameter kept: a URL of its own)
    /video/{i}.mp4            (media_bytes > 0) video/mp4 of media_bytes bytes, linked from
                              the index; /files/{i}.pdf is then padded to that size too
    /private/x.html           disallowed on "disallow_some" hosts
    /secret/y.html            disallowed for courtier on "disallow_some" hosts
    /meta-nofollow.html       <meta name=robots content=nofollow>; links to /hidden/{k}.html
    /hidden/{k}.html          only linked from the meta-nofollow page
    /nofollow-target.html     only linked with rel=nofollow
    /out/{k}                  301 → HostSpec.redirect_out[k] (linked from the index)
    /sitemaps/index.xml       (sitemap_pages > 0) a sitemap index named by robots.txt
    /sitemaps/pages.xml.gz    its gzipped child: /s/{i}.html with <lastmod>; with
                              sitemap_index_self the index also lists itself (twice)
    /sitemaps/big.xml(.gz)    (big_sitemap) a sitemap of big_sitemap long URLs /b/…, ~270 B each
    /s/{i}.html               pages listed only in that sitemap
    /near/{k}.html            (near_duplicates) one text, one word apart; each links
    /near-leaf/{k}.html       to its own leaf
    /trap/{n}.html            (trap_fanout) an endless trap of one text, left out of the oracle
    http://HOST:HTTP_PORT/…   (http_redirect, an HTTPS web's plain side) 301 to the https
                              twin ("twin"; "twin_pages": robots.txt 404) or index
                              ("home"), or answer as on https ("serve"); the index
                              links every /p/{i}.html there, each page the next one's
    /about.html               a page whose bytes are served again, identical, at
    /mirror/about.html        this second URL (both linked from the index), so a
                              crawler stores one response and one revisit

:meth:`TestWeb.expected_fetches` is the oracle (:mod:`courtier.testweb.oracle`): the
canonical URLs a correct polite crawler seeded with every host's ``/`` fetches with a
GET; :meth:`TestWeb.robots_chain` the robots fetches it makes for one host.

Stateful behaviours (busy answers, slow-down) depend on request counts and
so live in the server; :meth:`TestWeb.busy_page` is the response it sends.
"""

from __future__ import annotations

import gzip
import random
import re

from courtier.testweb.links import _WORDS, HtmlPage, Link, LinkWriter, leaf_page, render_html
from courtier.testweb.oracle import CrawlOracle
from courtier.testweb.responses import (
    PageResponse,
    is_robots_path,
    mp4_head,
    normalize_path,
    ok,
    padded,
    pdf_body,
    plain,
    png_body,
    redirect,
    w3c_datetime,
)
from courtier.testweb.spec import HostSpec, WebSpec

#: size of the near-duplicate pages: long enough that one word moves their SimHash by at
#: most a bit or two (a 3000-byte text can move 4-5 bits)
NEAR_PAGE_BYTES = 16_000
#: two URLs of every host serving the very same bytes
MIRRORED_PATHS = ("/about.html", "/mirror/about.html")
#: RFC 9309 §2.3.1.2: a crawler follows at least this many robots.txt redirects
_PLAIN_ROBOTS = {"404": 404, "500": 500, "401": 401, "403": 403, "429": 429, "503": 503}
_PLAIN_BODIES = {"404": b"no robots here\n", "500": b"robots.txt is broken\n"}

_BASE_DIR = "/p/deep/"


class TestWeb(CrawlOracle):
    """The site model bound to a scheme and port (see the module docstring)."""

    __test__ = False  # not a pytest test class

    def __init__(self, spec: WebSpec, port: int, scheme: str = "http",
                 http_port: int | None = None) -> None:
        self.spec = spec
        self.port = port
        self.scheme = scheme
        #: the plain-HTTP side of an HTTPS web (``HostSpec.http_redirect``), or None
        self.http_port = http_port
        self._cache: dict[tuple[str, str], PageResponse] = {}
        self._models: dict[tuple[str, str], HtmlPage] = {}

    # ----------------------------------------------------------------- URLs
    def base_url(self, host: str) -> str:
        """``scheme://host[:port]`` of a host (default port omitted)."""
        return LinkWriter(self.scheme, host, self.port, "/").canonical(host.lower(), "")

    def url(self, host: str, path: str) -> str:
        """The canonical URL of ``path`` on ``host``."""
        return self.base_url(host) + path

    def http_url(self, host: str, path: str) -> str:
        """The canonical ``http://`` URL of ``path`` on the plain-HTTP side."""
        if self.http_port is None:
            raise ValueError("this test web has no plain-HTTP side")
        return LinkWriter("http", host, self.http_port, "/").canonical(host.lower(), path)

    def _http_links(self, spec: HostSpec, pages: range) -> list[Link]:
        """Links to ``/p/{i}.html`` of the plain-HTTP side (``HostSpec.http_redirect``)."""
        if spec.http_redirect is None or self.http_port is None:
            return []
        urls = [self.http_url(spec.name, f"/p/{i}.html") for i in pages]
        return [Link(href=url, target=url) for url in urls]

    def seeds(self) -> list[str]:
        """Every host's index URL, in spec order."""
        return [self.url(h.name, "/") for h in self.spec.hosts]

    def robots_url(self, host: str) -> str:
        return self.url(host, "/robots.txt")

    def hosts_file_text(self, ip: str = "127.0.0.1") -> str:
        """An /etc/hosts style file mapping every host name to ``ip``."""
        return "".join(f"{ip} {h.name}\n" for h in self.spec.hosts)

    # ---------------------------------------------------------------- model
    def html_model(self, host: str, path: str) -> HtmlPage | None:
        """The link table of an HTML page (None when ``path`` is not an HTML page)."""
        spec = self.spec.host(host)
        if spec is None:
            return None
        key = (spec.name, path)
        if key not in self._models:
            model = self._build_model(spec, path)
            if model is None:
                return None
            self._models[key] = model
        return self._models[key]

    def _page_index(self, spec: HostSpec, path: str) -> int | None:
        m = re.fullmatch(r"/p/(\d+)\.html", path)
        if m is None or (len(m.group(1)) > 1 and m.group(1).startswith("0")):
            return None
        i = int(m.group(1))
        return i if i < spec.pages else None

    def _rng(self, host: str, path: str) -> random.Random:
        return random.Random(f"{self.spec.seed}:{host}:{path}")

    def _other_hosts(self, spec: HostSpec) -> list[HostSpec]:
        return [h for h in self.spec.hosts if h.name != spec.name]

    def _build_model(self, spec: HostSpec, path: str) -> HtmlPage | None:
        host = spec.name
        writer = LinkWriter(self.scheme, host, self.port, path[: path.rfind("/") + 1])
        others = self._other_hosts(spec)
        if path == "/":
            n = min(spec.pages, 8)
            links = [writer.link(host, f"/p/{j}.html") for j in range(n)]
            links += [
                writer.link(host, p)
                for p in (
                    "/private/x.html",
                    "/secret/y.html",
                    "/loop/a",
                    "/r/0",
                    "/missing/0.html",
                    "/files/0.pdf",
                    "/img/0.png",
                    "/meta-nofollow.html",
                )
            ]
            links.append(writer.link(host, "/nofollow-target.html", rel="nofollow"))
            links.append(writer.self_fragment("/"))
            if others:
                links.append(writer.link(others[0].name, "/"))
            links += [writer.link(host, p) for p in MIRRORED_PATHS]
            links += [Link(href=url, target=url) for url in spec.extra_links]
            links += [writer.link(host, f"/out/{k}") for k in range(len(spec.redirect_out))]
            links += [writer.link(host, f"/near/{k}.html") for k in range(spec.near_duplicates)]
            if spec.trap_fanout:
                links.append(writer.link(host, trap_path(0)))
            if spec.media_bytes:
                links.append(writer.link(host, "/video/0.mp4"))
            if spec.tracking_links:
                links += [tracked_link(writer, host, j, "index") for j in range(n)]
                kept = writer.canonical(host, "/p/0.html?v=2")
                links.append(Link(href=kept, target=kept))
            links += self._http_links(spec, range(spec.pages))
            return HtmlPage(title=f"{host} index", links=tuple(links))
        if spec.trap_fanout and (m := re.fullmatch(r"/trap/(\d{6,})\.html", path)):
            n, fanout = int(m.group(1)), spec.trap_fanout
            return HtmlPage(title=f"{host} calendar", links=tuple(
                writer.link(host, trap_path(n * fanout + k)) for k in range(1, fanout + 1)))
        if m := re.fullmatch(r"/near/(\d+)\.html", path):
            if int(m.group(1)) >= spec.near_duplicates:
                return None
            leaf = writer.canonical(host, f"/near-leaf/{m.group(1)}.html")
            return HtmlPage(title=f"{host} near", links=(Link(href=leaf, target=leaf),))
        if path in MIRRORED_PATHS:
            # identical bytes under both URLs: one absolute link, one title, one text
            home = writer.canonical(host, "/")
            return HtmlPage(title=f"{host} about", links=(Link(href=home, target=home),))
        i = self._page_index(spec, path)
        if i is not None:
            return self._content_page(spec, i, others)
        if path == "/meta-nofollow.html":
            links = [writer.link(host, f"/hidden/{k}.html") for k in range(2)]
            if others:
                links.append(writer.link(others[0].name, "/hidden/9.html"))
            return HtmlPage(f"{host} meta nofollow", tuple(links), meta_robots="nofollow")
        if path in ("/private/x.html", "/secret/y.html", "/nofollow-target.html") or (
            re.fullmatch(r"/hidden/\d+\.html", path)
            or self._near_leaf_or_sitemap_page(spec, path)
        ):
            return leaf_page(f"{host} {path}", writer)
        return None

    @staticmethod
    def _near_leaf_or_sitemap_page(spec: HostSpec, path: str) -> bool:
        if m := re.fullmatch(r"/near-leaf/(\d+)\.html", path):
            return int(m.group(1)) < spec.near_duplicates
        if m := re.fullmatch(r"/s/(\d+)\.html", path):
            return int(m.group(1)) < spec.sitemap_pages
        return False

    def _content_page(self, spec: HostSpec, i: int, others: list[HostSpec]) -> HtmlPage:
        host, n = spec.name, spec.pages
        rng = self._rng(host, f"/p/{i}.html")
        with_base = i % 4 == 3
        base_dir = _BASE_DIR if with_base else "/p/"
        writer = LinkWriter(self.scheme, host, self.port, base_dir, start=i * 5)
        targets = [(i + 1) % n, 2 * i + 1, 2 * i + 2, rng.randrange(n), rng.randrange(n)]
        links: list[Link] = [writer.link(host, f"/p/{j}.html") for j in targets if j < n]
        links.append(writer.link(host, "/"))
        specials = (
            (i % 3 == 1, f"/r/{i}"),
            (i % 5 == 0, f"/missing/{i}.html"),
            (i % 4 == 1, f"/files/{i}.pdf"),
            (i % 4 == 2, f"/img/{i}.png"),
            (i % 7 == 3, "/private/x.html"),
            (i % 7 == 4, "/secret/y.html"),
            (i % 9 == 5, "/loop/b"),
        )
        links += [writer.link(host, p) for cond, p in specials if cond]
        if spec.tracking_links:
            links.append(tracked_link(writer, host, (i + 1) % n, f"p{i}"))
        links += self._http_links(spec, range((i + 1) % n, (i + 1) % n + 1))
        if i % 8 == 6:
            links.append(writer.link(host, "/nofollow-target.html", rel="external NoFollow"))
        if not with_base:
            links.append(writer.self_fragment(f"/p/{i}.html"))
        for _ in range(2 if others else 0):
            other = rng.choice(others)
            links.append(writer.link(other.name, f"/p/{rng.randrange(other.pages)}.html"))
        if others and i % 6 == 0:
            links.append(writer.link(rng.choice(others).name, "/private/x.html"))
        base = f"{self.scheme.upper()}://{writer.authority(host).upper()}{_BASE_DIR}"
        return HtmlPage(
            title=f"{host} page {i}", links=tuple(links), base_href=base if with_base else None
        )

    # ------------------------------------------------------------- responses
    def page(self, host: str, path_qs: str) -> PageResponse:
        """The response for ``path_qs`` on ``host`` (404 for unknown hosts and paths)."""
        key = (host.lower().rstrip("."), normalize_path(path_qs))
        cached = self._cache.get(key)
        if cached is None:
            cached = self._respond(*key)
            self._cache[key] = cached
        return cached

    def _respond(self, host: str, path: str) -> PageResponse:
        spec = self.spec.host(host)
        if spec is None:
            return plain(404, b"unknown host\n")
        if is_robots_path(path):
            robots = self._robots_response(spec, path)
            if robots is not None:
                return robots
        if m := re.fullmatch(r"/r/(\d+)", path):
            j = int(m.group(1))
            if j >= spec.pages:
                return plain(404, b"no such page\n")
            location = f"/p/{j}.html" if j % 2 == 0 else self.url(host, f"/p/{j}.html")
            return redirect(301, location)
        if (m := re.fullmatch(r"/out/(\d+)", path)) and int(m.group(1)) < len(spec.redirect_out):
            return redirect(301, spec.redirect_out[int(m.group(1))])
        sitemap = self._sitemap_response(spec, path)
        if sitemap is not None:
            return sitemap
        if path in ("/loop/a", "/loop/b"):
            return redirect(302, "/loop/b" if path == "/loop/a" else "/loop/a")
        if m := re.fullmatch(r"/files/(\d+)\.pdf", path):
            return ok("application/pdf", padded(pdf_body(host, int(m.group(1))),
                                                 spec.media_bytes))
        if spec.media_bytes and (m := re.fullmatch(r"/video/(\d+)\.mp4", path)):
            return ok("video/mp4", padded(mp4_head(int(m.group(1))), spec.media_bytes))
        if m := re.fullmatch(r"/img/(\d+)\.png", path):
            return ok("image/png", png_body(int(m.group(1))))
        model = self.html_model(host, path)
        if model is None:
            return plain(404, b"not found\n")
        text_of = MIRRORED_PATHS[0] if path in MIRRORED_PATHS else path
        near = re.fullmatch(r"/near/(\d+)\.html", path)
        if near:
            text_of = "/near/"  # one text for all of them...
        elif path.startswith("/trap/"):
            text_of = "/trap/"  # links of one length: one visible text on every page
        size = NEAR_PAGE_BYTES if near else spec.page_bytes
        body = render_html(model, self._rng(host, text_of), size)
        if near:  # ...but for one word
            word = _WORDS[int(near.group(1)) % len(_WORDS)]
            body = body.replace(b'<p id="section-2">end</p>',
                                f'<p id="section-2">end {word}</p>'.encode())
        return ok("text/html; charset=utf-8", body)

    def plain_http_page(self, host: str, path_qs: str) -> PageResponse | None:
        """What ``path_qs`` of ``host`` answers on the plain-HTTP side of an HTTPS web:
        301 to its https twin (``http_redirect="twin"``, and ``"twin_pages"`` but for
        robots.txt: 404), 301 to the https index (``"home"``), None: what it answers on
        https (``"serve"``), else 404."""
        spec = self.spec.host(host.lower().rstrip("."))
        if spec is None or spec.http_redirect is None:
            return plain(404, b"no plain http here\n")
        if spec.http_redirect == "serve":
            return None
        if spec.http_redirect == "twin_pages" and is_robots_path(normalize_path(path_qs)):
            return plain(404, b"no robots.txt on http\n")
        if spec.http_redirect in ("twin", "twin_pages"):
            return redirect(301, self.url(spec.name, path_qs))
        return redirect(301, self.url(spec.name, "/"))

    def edition(self, host: str, path_qs: str, page: PageResponse, count: int) -> PageResponse:
        """``page`` as served for the ``count``-th request of its path: a changing page
        (``HostSpec.changing_pages``) carries the count in its text and ETag."""
        spec = self.spec.host(host)
        m = re.fullmatch(r"/p/(\d+)\.html", normalize_path(path_qs))
        if spec is None or m is None or int(m.group(1)) >= spec.changing_pages \
                or page.status != 200:
            return page
        body = page.body.replace(b"</body>", f"<p>edition {count}</p></body>".encode(), 1)
        return ok(page.header("Content-Type") or "text/html", body)

    def sitemap_urls(self, host: str) -> list[tuple[str, float | None]]:
        """(URL, lastmod or None) of every page the host's gzipped sitemap lists."""
        spec = self.spec.host(host)
        if spec is None:
            return []
        return [
            (self.url(spec.name, f"/s/{i}.html"),
             None if spec.sitemap_lastmod is None else spec.sitemap_lastmod + i * 86400.0)
            for i in range(spec.sitemap_pages)
        ]

    def big_sitemap_urls(self, host: str) -> list[str]:
        """The URLs ``/sitemaps/big.xml`` of ``host`` lists (``HostSpec.big_sitemap``)."""
        spec = self.spec.host(host)
        count = 0 if spec is None else spec.big_sitemap
        return [self.url(host, f"/b/{i:06d}/{'x' * 180}.html") for i in range(count)]

    def _big_sitemap(self, spec: HostSpec) -> bytes:
        stamp = f"<lastmod>{w3c_datetime(1_700_000_000)}</lastmod>"
        entries = "".join(f"<url><loc>{url}</loc>{stamp}</url>\n"
                          for url in self.big_sitemap_urls(spec.name))
        return (f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {_SITEMAP_NS}>\n'
                f"{entries}</urlset>\n").encode()

    def _sitemap_response(self, spec: HostSpec, path: str) -> PageResponse | None:
        if spec.big_sitemap and path == "/sitemaps/big.xml":
            return ok("application/xml", self._big_sitemap(spec))
        if spec.big_sitemap and path == "/sitemaps/big.xml.gz":
            return ok("application/x-gzip", gzip.compress(self._big_sitemap(spec), mtime=0))
        if not spec.sitemap_pages:
            return None
        ns = _SITEMAP_NS
        if path == "/sitemaps/index.xml":
            locs = [self.url(spec.name, "/sitemaps/pages.xml.gz")]
            if spec.sitemap_index_self:
                itself = self.url(spec.name, "/sitemaps/index.xml")
                scheme, rest = itself.split("://", 1)
                authority, tail = rest.split("/", 1)
                locs = [itself, *locs, f"{scheme.upper()}://{authority.upper()}/{tail}#top"]
            listed = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
            xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex {ns}>'
                   f"{listed}</sitemapindex>\n")
            return ok("application/xml", xml.encode())
        if path == "/sitemaps/pages.xml.gz":
            entries = []
            for url, lastmod in self.sitemap_urls(spec.name):
                stamp = "" if lastmod is None else (
                    f"<lastmod>{w3c_datetime(lastmod)}</lastmod>")
                entries.append(f"<url><loc>{url}</loc>{stamp}</url>")
            xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {ns}>'
                   + "".join(entries) + "</urlset>\n")
            return ok("application/x-gzip", gzip.compress(xml.encode(), mtime=0))
        return None

    def _robots_response(self, spec: HostSpec, path: str) -> PageResponse | None:
        """The answer for a robots path of ``spec``'s flavour; None falls through to pages."""
        kind, host = spec.robots, spec.name
        if path == "/robots.txt":
            if kind in _PLAIN_ROBOTS:
                return plain(_PLAIN_ROBOTS[kind], _PLAIN_BODIES.get(kind, b"robots.txt: no\n"))
            if kind in ("redirect", "redirect_chain"):
                first = "/robots-real.txt" if kind == "redirect" else "/robots-hop/1"
                return redirect(301, self.url(host, first))
            if kind == "redirect_loop":
                return redirect(301, self.url(host, "/robots-loop/a"))
            if kind == "redirect_cross_host":
                return redirect(301, self.robots_url(self.spec.robots_target(spec).name))
            return ok("text/plain; charset=utf-8", self._with_sitemaps(spec, spec.robots_body()))
        if path == "/robots-real.txt" and kind in ("redirect", "redirect_chain"):
            body = self._with_sitemaps(spec, spec.robots_body(real=True))
            return ok("text/plain; charset=utf-8", body)
        if kind == "redirect_chain" and path == "/robots-hop/1":
            return redirect(302, "/robots-hop/2")
        if kind == "redirect_chain" and path == "/robots-hop/2":
            return redirect(307, "../robots-real.txt")
        if kind == "redirect_loop" and path in ("/robots-loop/a", "/robots-loop/b"):
            return redirect(302, "/robots-loop/b" if path.endswith("a") else "/robots-loop/a")
        return None

    def _with_sitemaps(self, spec: HostSpec, body: bytes) -> bytes:
        lines = spec.sitemap_lines(self.base_url(spec.name))
        return body + lines.encode() if body and lines else body

    def busy_page(self, spec: HostSpec, retry_after: str | None) -> PageResponse:
        """A busy answer of ``spec`` (its ``busy_status``), with ``Retry-After`` when given."""
        headers: tuple[tuple[str, str], ...] = (("Content-Type", "text/plain; charset=utf-8"),)
        if retry_after is not None:
            headers += (("Retry-After", retry_after),)
        return PageResponse(spec.busy_status, headers, b"busy, come back later\n")

    # ---------------------------------------------------------------- oracle


#: the tracking parameters of the links of a ``tracking_links`` host, by link number
_TRACKING_QUERIES = ("utm_source={src}&utm_medium=web", "fbclid=IwAR{src}",
                     "utm_campaign=launch&gclid={src}", "utm_source={src}")


def tracked_link(writer: LinkWriter, host: str, j: int, source: str) -> Link:
    """A link to /p/{j}.html with tracking parameters; its target is the page itself."""
    page = writer.canonical(host, f"/p/{j}.html")
    query = _TRACKING_QUERIES[j % len(_TRACKING_QUERIES)].format(src=source)
    return Link(href=f"{page}?{query}", target=page)


_SITEMAP_NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def trap_path(n: int) -> str:
    """The path of the ``n``-th page of a host's trap (``HostSpec.trap_fanout``)."""
    return f"/trap/{n:06d}.html"
