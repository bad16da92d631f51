"""Generate the realistic bench web: what real sites have, for issues #29 and #35.

The easy web of :mod:`static_web` has one kind of host and one kind of page. This
web adds, each in a stated share, what a crawler meets on real sites (fractions are
of all hosts, assigned by an exact count, then shuffled with the seed):

====================  =======  ============================================================
host kind             share    robots.txt
====================  =======  ============================================================
``normal``            82 %     200: ``Disallow: /private/``
``crawl-delay``       10 %     200: the same plus ``Crawl-delay: 1`` (half) or ``2`` (half)
``robots-404``        5 %      404: everything allowed (no ``/private/`` there)
``robots-500``        3 %      500: nothing allowed (RFC 9309 §2.3.1.4), pages exist anyway
====================  =======  ============================================================

60 % of the hosts with a robots.txt list sitemaps in it (``Sitemap:`` lines): a
third of those a plain ``/sitemap.xml``, a third a gzip'd ``/sitemap.xml.gz``, a
third an index ``/sitemap_index.xml`` of ``/sitemaps/1.xml`` and ``/sitemaps/2.xml.gz``.
A sitemap lists only pages that links reach too, so a crawler that reads sitemaps
and one that does not have the same set of pages to find.

Every host has ``pages`` chain pages (``/`` and ``/p/<k>.html``, each linking the
next), and beside them (one per 10 chain pages, at least one when ``pages`` >= 3):

* **exact duplicates** ``/p/<j>-copy.html``: the bytes of ``/p/<j>.html``;
* **near duplicates** ``/p/<j>-v2.html``: ``/p/<j>.html`` with three words changed;
* **query pages** ``/list.html?cat=<c>&page=<n>`` (2 × 2 per host), served by nginx
  from ``/l/<c>_<n>.html`` whatever the order of the parameters and whatever else
  the query holds. Links also write them as **query-order variants**
  (``?page=<n>&cat=<c>``) and **tracking variants** (``&utm_source=…``), and write
  chain pages with tracking parameters (``/p/<k>.html?utm_source=…&utm_medium=…``);
* **redirects**: ``/old/<k>.html`` (301) and ``/moved/<k>.html`` (302) to
  ``/p/<k>.html``, and the chain ``/older/<k>.html`` 301 → ``/old/<k>.html`` 301 →
  ``/p/<k>.html`` (nginx rules, no files);
* **broken links** (404): ``/p/<pages + m>.html`` and ``/gone/<m>.html``;
* **non-HTML files** (:data:`FILE_KINDS`, each on an exact share of the hosts): PDFs
  (``/docs/report-<n>.pdf``, 60 KB–2 MB), a full-size photo (``/img/photo-1.jpg``,
  100 KB–1.5 MB), a video (``/media/clip-1.mp4``, 3–6 MB), a download served without
  a ``Content-Type`` (``/download/file-1``, a PDF's bytes) and a spreadsheet served
  with a wrong one (``/export/table-1.xls`` as ``text/plain``). Sizes are drawn
  log-uniform; the bodies are random bytes after the format's magic number, taken
  from a small pool and hard-linked into the hosts (``_files/``), so they cost little
  disk. The home page links every file of its host, other pages one a quarter of the
  time. They are not pages: the manifest lists them in ``non_html`` (category, size,
  declared type), never in ``pages``.

Each page is 30–100 KB (uniform) with 50–150 anchors (uniform): the next chain page,
the host's extras (the home page links every one of them; other pages a query page
half of the time), one of the host's three redirects, one of its three tracking
variants, one of its two broken URIs half of the time, six pages of other hosts,
``/private/secret.html`` (a broken link on robots-404 hosts), two ``*.invalid``
hosts, a ``mailto:`` and a ``javascript:`` link, and pages of the same host for the
rest (in the static web's root-relative, document-relative, absolute and
``#fragment`` forms).

Contract: the web is a pure function of ``(hosts, pages, port, seed, scheme)``
(``scheme="https"`` writes absolute links, sitemaps and seeds for the same web
served over TLS).
:func:`generate` writes it and returns its :class:`RealisticManifest`, which says
which resources exist and are allowed (the coverage denominator, ``pages``), what
each one is (``category``, ``duplicate_of``), each host's robots.txt answer, rules,
Crawl-delay and sitemaps, and which linked URIs are variants, redirects or broken.
:func:`resource_of` maps any request URI to the resource nginx serves for it, so a
judge reading nginx's log counts a page fetched under two spellings once.
"""

from __future__ import annotations

import gzip
import math
import os
import random
import shutil
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import access_log
import static_web
from static_web import host_name, html_page, page_uri

#: (kind, share of all hosts), in the order the shares are taken
HOST_KINDS: tuple[tuple[str, float], ...] = (
    ("crawl-delay", 0.10),
    ("robots-404", 0.05),
    ("robots-500", 0.03),
)
NORMAL = "normal"
CRAWL_DELAYS = (1.0, 2.0)
SITEMAP_SHARE = 0.6
SITEMAP_FORMS = ("plain", "gzip", "index")
LIST_CATS = ("news", "shop")
LIST_PAGES = (1, 2)
TRACKING = ("utm_source=newsletter&utm_medium=email", "utm_campaign=spring&fbclid=IwAR3x",
            "gclid=Cj0KCQ", "utm_source=feed")
PRIVATE_PATH = static_web.PRIVATE_PATH
MIN_PAGE_BYTES, MAX_PAGE_BYTES = 30_000, 100_000
MIN_LINKS, MAX_LINKS = 50, 150
#: request URIs answered by nginx rules in every host: (prefix, status, target prefix)
REDIRECT_RULES = (("/old/", 301, "/p/"), ("/moved/", 302, "/p/"), ("/older/", 301, "/old/"))
#: the generator's version, in the manifest: a kept web (``--web-dir``) of another
#: version is made again (2: the linked non-HTML files)
WEB_VERSION = 2


@dataclass(frozen=True)
class FileKind:
    """One kind of linked non-HTML file: its manifest category, the share of all hosts
    that have one, its URI, the ``Content-Type`` nginx sends for it (None: no header;
    ``nginx.conf.template`` says so for its path), its size range (drawn log-uniform)
    and the bytes its body starts with."""

    category: str
    share: float
    uri: str
    content_type: str | None
    min_bytes: int
    max_bytes: int
    magic: bytes


_PDF = b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n"
#: the linked files of the web, each on ``share`` of the hosts (exact counts, seeded)
FILE_KINDS: tuple[FileKind, ...] = (
    FileKind("pdf", 0.60, "/docs/report-1.pdf", "application/pdf", 60_000, 2_000_000, _PDF),
    FileKind("pdf", 0.20, "/docs/report-2.pdf", "application/pdf", 60_000, 2_000_000, _PDF),
    FileKind("image", 0.40, "/img/photo-1.jpg", "image/jpeg", 100_000, 1_500_000,
             b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"),
    FileKind("video", 0.05, "/media/clip-1.mp4", "video/mp4", 3_000_000, 6_000_000,
             b"\x00\x00\x00\x20ftypisom\x00\x00\x02\x00"),
    FileKind("no-type", 0.05, "/download/file-1", None, 100_000, 1_000_000, _PDF),
    FileKind("wrong-type", 0.05, "/export/table-1.xls", "text/plain", 50_000, 500_000,
             b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"),
)
#: distinct bodies made for each kind of file (hosts share them by hard links)
FILE_POOL = 6
#: how often a page other than the home page links one of its host's files
FILE_LINK_SHARE = 0.25


@dataclass(frozen=True)
class LinkedFile:
    """A non-HTML file the web links: its category, its size, the type nginx declares."""

    category: str
    bytes: int
    content_type: str | None


@dataclass(frozen=True)
class HostRobots:
    """What a host's robots.txt answers and what a polite crawler must then do."""

    status: int
    disallow: list[str]
    crawl_delay: float | None
    sitemaps: list[str]


@dataclass(frozen=True)
class RealisticManifest:
    """What the realistic web contains; every URI is a request URI of its host.

    ``pages``: resources that exist, are allowed and are reachable from the seeds
    (the coverage denominator; query pages by their canonical URI, see
    :func:`resource_of`). ``category``: each of them is ``home``, ``page``,
    ``exact-dup``, ``near-dup`` or ``list``. ``duplicate_of``: original of each
    exact and near duplicate. ``unreachable``: pages that exist but robots.txt
    forbids (a polite crawler never fetches them). ``variants``: linked spellings
    → the canonical URI they serve. ``redirects``: redirecting URIs (linked ones and
    the second hop of a chain) → ``[status, location]``. ``broken``: linked URIs that answer 404.
    ``non_html``: the linked files that are not pages (:class:`LinkedFile` by URI), on every
    host, robots-500 hosts' included (never in ``pages``: not part of the coverage).
    """

    root: str
    port: int
    seed: int
    hosts: list[str]
    kinds: dict[str, str]
    robots: dict[str, HostRobots]
    pages: dict[str, list[str]]
    category: dict[str, dict[str, str]]
    duplicate_of: dict[str, dict[str, str]]
    unreachable: dict[str, list[str]]
    variants: dict[str, dict[str, str]]
    redirects: dict[str, dict[str, list[int | str]]]
    broken: dict[str, list[str]]
    page_bytes: list[int] = field(default_factory=lambda: [MIN_PAGE_BYTES, MAX_PAGE_BYTES])
    links_per_page: list[int] = field(default_factory=lambda: [MIN_LINKS, MAX_LINKS])
    scheme: str = "http"
    pages_per_host: int = 0
    non_html: dict[str, dict[str, LinkedFile]] = field(default_factory=dict)
    version: int = 1  # manifests written before the field were of version 1

    @property
    def total_pages(self) -> int:
        """Resources a complete, polite crawl fetches (robots.txt and sitemaps excluded)."""
        return sum(len(v) for v in self.pages.values())

    @property
    def disallowed(self) -> list[str]:
        """Every disallowed prefix of any host (for the table's legend)."""
        return sorted({p for r in self.robots.values() for p in r.disallow})

    def seeds(self) -> list[str]:
        """One seed URL per host: its home page (robots-500 hosts included)."""
        return [f"{self.scheme}://{h}:{self.port}/" for h in self.hosts]

    def crawl_delays(self) -> dict[str, float]:
        """Host → its robots.txt Crawl-delay, for the hosts that have one."""
        return {h: r.crawl_delay for h, r in self.robots.items() if r.crawl_delay is not None}

    def host_rules(self, delay: float) -> dict[str, access_log.HostRules]:
        """What the judge holds each host to at run delay ``delay``: its disallowed
        prefixes and the gap max(delay, Crawl-delay)."""
        return {h: access_log.HostRules(tuple(r.disallow), max(delay, r.crawl_delay or 0.0))
                for h, r in self.robots.items()}

    def non_html_of(self, host: str, uri: str) -> tuple[str, int] | None:
        """(category, size) of the non-HTML file request URI ``uri`` of ``host`` gets (its
        query ignored, as nginx does), or None for anything else: the judge's
        ``access_log.check_traffic`` asks it."""
        got = self.non_html.get(host, {}).get(urlsplit(uri).path)
        return None if got is None else (got.category, got.bytes)

    def reachable_files(self) -> dict[str, dict[str, LinkedFile]]:
        """The linked files a polite crawl can reach (robots-500 hosts' left out)."""
        return {h: files for h, files in self.non_html.items() if self.robots[h].status != 500}

    def save(self) -> Path:
        """Write ``manifest.json`` into the web root and return its path."""
        return static_web.save_manifest(self.root, asdict(self))

    @classmethod
    def load(cls, root: str | Path) -> RealisticManifest:
        """Read the manifest written by :meth:`save`."""
        data = static_web.read_manifest(root)
        data["robots"] = {h: HostRobots(**r) for h, r in data["robots"].items()}
        data["non_html"] = {h: {u: LinkedFile(**f) for u, f in files.items()}
                            for h, files in data.get("non_html", {}).items()}
        return cls(**data)


def judge(entries: list[access_log.LogEntry], web: static_web.SiteManifest | RealisticManifest,
          delay: float, tolerance: float = 0.01
          ) -> tuple[access_log.PolitenessReport, access_log.CoverageReport]:
    """Politeness and coverage of a crawl of ``web`` at run delay ``delay``, read from
    the server's log: on the realistic web each host is held to its own robots.txt
    answer and to max(delay, its Crawl-delay), and spellings of one page count once;
    on the static web one rule holds for every host and a URI is its own page."""
    if isinstance(web, RealisticManifest):
        return (access_log.check_politeness(entries, delay, tolerance, web.disallowed,
                                            web.host_rules(delay)),
                access_log.check_coverage(entries, web.pages, resource_of))
    return (access_log.check_politeness(entries, delay, tolerance, web.disallowed),
            access_log.check_coverage(entries, web.pages))


def list_uri(cat: str, page: int, form: str = "canonical") -> str:
    """A query page's URI, written in one of the forms links use."""
    if form == "swapped":
        return f"/list.html?page={page}&cat={cat}"
    if form == "tracked":
        return f"/list.html?cat={cat}&page={page}&utm_source=feed&utm_medium=rss"
    return f"/list.html?cat={cat}&page={page}"


def resource_of(uri: str) -> str:
    """The resource nginx serves for request URI ``uri``, as the manifest names it.

    nginx serves a static file whatever the query string, so the query of any other
    path is dropped; ``/list.html`` is served from its ``cat`` and ``page``
    parameters alone, in whatever order and beside whatever else."""
    parts = urlsplit(uri)
    if parts.path != "/list.html":
        return parts.path
    args = dict(parse_qsl(parts.query))
    return f"/list.html?cat={args.get('cat', '')}&page={args.get('page', '')}"


def assign_kinds(hosts: int, seed: int) -> list[str]:
    """Each host's kind: exact counts of each share, shuffled with ``seed``."""
    kinds: list[str] = []
    for kind, share in HOST_KINDS:
        kinds += [kind] * round(share * hosts)
    kinds += [NORMAL] * (hosts - len(kinds))
    random.Random(seed * 7_919 + hosts).shuffle(kinds)
    return kinds


def near_duplicate(html: str, rng: random.Random, words: int = 3) -> str:
    """``html`` with ``words`` words of its first paragraph's text replaced."""
    start = html.index("<main>\n<p>") + len("<main>\n<p>")
    end = min(i for i in (html.find(" <a ", start), html.find("</p>", start)) if i >= 0)
    text = html[start:end].split(" ")
    for i in rng.sample(range(len(text)), min(words, len(text))):
        text[i] = rng.choice(("revised", "amended", "updated")) + str(i)
    return html[:start] + " ".join(text) + html[end:]


@dataclass
class _Host:
    """One host's plan while it is generated."""

    name: str
    kind: str
    chain: int
    copies: list[int]
    nears: list[int]
    redirects: dict[str, list[int | str]]
    linked_redirects: list[str]
    broken: list[str]
    tracked: dict[str, str]
    files: list[str] = field(default_factory=list)
    variants: dict[str, str] = field(default_factory=dict)

    def extra_links(self) -> list[str]:
        """Every extra resource of the host, each in a linked form (the home page's)."""
        links = [f"/p/{j}-copy.html" for j in self.copies]
        links += [f"/p/{j}-v2.html" for j in self.nears]
        forms = ("canonical", "swapped", "tracked")
        for i, (cat, n) in enumerate((c, n) for c in LIST_CATS for n in LIST_PAGES):
            links.append(self.note_list(cat, n, forms[i % 3]))
        return links

    def note_list(self, cat: str, page: int, form: str) -> str:
        uri = list_uri(cat, page, form)
        if form != "canonical":
            self.variants[uri] = list_uri(cat, page)
        return uri


def _plan_host(name: str, kind: str, pages: int, rng: random.Random) -> _Host:
    """The host's extras: duplicates, one redirect of each rule (the third a chain), two
    broken URIs and three tracking variants of chain pages, which its pages link."""
    extras = max(1, pages // 10) if pages >= 3 else 0
    # originals among the chain pages 1..pages-1, spread evenly; copies first, nears last
    copies = [1 + (i * 7) % (pages - 1) for i in range(extras)] if extras else []
    nears = [pages - 1 - (i * 5) % (pages - 1) for i in range(extras)] if extras else []
    redirects: dict[str, list[int | str]] = {}
    linked = []
    for prefix, status, target in REDIRECT_RULES:
        t = rng.randrange(1, pages)
        linked.append(f"{prefix}{t}.html")
        redirects[f"{prefix}{t}.html"] = [status, f"{target}{t}.html"]
        if target != "/p/":  # a chain: its second hop too
            redirects.setdefault(f"{target}{t}.html", [301, f"/p/{t}.html"])
    broken = [f"/p/{pages + rng.randrange(50)}.html", f"/gone/{rng.randrange(50)}.html"]
    tracked = {}
    for query in rng.sample(TRACKING, 3):
        t = rng.randrange(1, pages)
        tracked[f"/p/{t}.html?{query}"] = f"/p/{t}.html"
    return _Host(name, kind, pages, copies, nears, redirects, linked, broken, tracked)


def _hrefs(rng: random.Random, plan: _Host, names: list[str], hi: int, k: int, port: int,
           n_links: int, home: bool, scheme: str) -> list[str]:
    """The anchors of one page of ``plan`` (chain page ``k``; ``home`` for "/")."""
    host, pages = plan.name, plan.chain
    hrefs = [static_web._link_forms(rng, k, (k + 1) % pages, host, port, scheme)]
    if home:
        hrefs += plan.extra_links() + plan.files
    else:
        if rng.random() < 0.5:
            cat, n = rng.choice(LIST_CATS), rng.choice(LIST_PAGES)
            hrefs.append(plan.note_list(cat, n, rng.choice(("canonical", "swapped",
                                                            "tracked"))))
        if plan.files and rng.random() < FILE_LINK_SHARE:
            hrefs.append(rng.choice(plan.files))
    hrefs.append(rng.choice(plan.linked_redirects))
    tracked = rng.choice(list(plan.tracked))
    plan.variants[tracked] = plan.tracked[tracked]
    hrefs.append(tracked)
    if rng.random() < 0.5:
        hrefs.append(rng.choice(plan.broken))
    for _ in range(min(6, len(names) - 1)):
        other = rng.randrange(len(names) - 1)
        other += other >= hi
        hrefs.append(f"{scheme}://{names[other]}:{port}{page_uri(rng.randrange(pages))}")
    hrefs += [PRIVATE_PATH, f"http://ext{rng.randrange(1000)}.invalid/away.html",
              f"https://ext{rng.randrange(1000)}.invalid/", "mailto:webmaster@example.invalid",
              "javascript:void(0)"]
    while len(hrefs) < n_links:
        hrefs.append(static_web._link_forms(rng, k, rng.randrange(pages), host, port, scheme))
    rng.shuffle(hrefs)
    return hrefs


def _robots(plan: _Host, base: str, sitemap_form: str | None, delay: float | None
            ) -> HostRobots:
    if plan.kind == "robots-404":
        return HostRobots(404, [], None, [])
    if plan.kind == "robots-500":
        return HostRobots(500, ["/"], None, [])
    sitemaps = {None: [], "plain": ["/sitemap.xml"], "gzip": ["/sitemap.xml.gz"],
                "index": ["/sitemap_index.xml"]}[sitemap_form]
    return HostRobots(200, ["/private/"], delay, [base + s for s in sitemaps])


def _robots_txt(robots: HostRobots) -> str:
    lines = ["User-agent: *"]
    if robots.crawl_delay is not None:
        lines.append(f"Crawl-delay: {robots.crawl_delay:g}")
    lines += [f"Disallow: {p}" for p in robots.disallow]
    lines += [""] + [f"Sitemap: {s}" for s in robots.sitemaps] if robots.sitemaps else []
    return "\n".join(lines) + "\n"


def _urlset(base: str, uris: list[str]) -> bytes:
    locs = "".join(f"<url><loc>{base}{u.replace('&', '&amp;')}</loc></url>\n" for u in uris)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{locs}</urlset>\n").encode()


def _write_sitemaps(base_dir: Path, base: str, form: str, uris: list[str]) -> None:
    if form == "plain":
        (base_dir / "sitemap.xml").write_bytes(_urlset(base, uris))
    elif form == "gzip":
        (base_dir / "sitemap.xml.gz").write_bytes(gzip.compress(_urlset(base, uris), mtime=0))
    else:
        half = len(uris) // 2
        (base_dir / "sitemaps").mkdir(exist_ok=True)
        (base_dir / "sitemaps" / "1.xml").write_bytes(_urlset(base, uris[:half]))
        (base_dir / "sitemaps" / "2.xml.gz").write_bytes(
            gzip.compress(_urlset(base, uris[half:]), mtime=0))
        entries = "".join(f"<sitemap><loc>{base}/sitemaps/{n}</loc></sitemap>\n"
                          for n in ("1.xml", "2.xml.gz"))
        (base_dir / "sitemap_index.xml").write_text(
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{entries}</sitemapindex>\n", encoding="utf-8")


def assign_files(hosts: int, seed: int) -> list[list[int]]:
    """Each host's linked files, as indices into :data:`FILE_KINDS`: every kind on an
    exact count of ``share`` × ``hosts`` hosts, picked with ``seed``."""
    rng = random.Random(seed * 15_485_863 + hosts)
    files: list[list[int]] = [[] for _ in range(hosts)]
    for i, kind in enumerate(FILE_KINDS):
        for h in sorted(rng.sample(range(hosts), round(kind.share * hosts))):
            files[h].append(i)
    return files


def _file_pool(root: Path, seed: int) -> list[list[Path]]:
    """:data:`FILE_POOL` bodies of each kind of file under ``root/_files`` (random bytes
    after the kind's magic number, sizes drawn log-uniform with ``seed``)."""
    folder = root / "_files"
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed * 32_452_843)
    pool: list[list[Path]] = []
    for i, kind in enumerate(FILE_KINDS):
        paths = []
        for j in range(FILE_POOL):
            size = round(math.exp(rng.uniform(math.log(kind.min_bytes),
                                              math.log(kind.max_bytes))))
            path = folder / f"{i}-{j}"
            path.write_bytes(kind.magic + rng.randbytes(size - len(kind.magic)))
            paths.append(path)
        pool.append(paths)
    return pool


def _place_file(body: Path, target: Path) -> None:
    """``target`` becomes a hard link to ``body`` (made again if it is there)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    os.link(body, target)


def generate(root: str | Path, hosts: int = 150, pages: int = 10, port: int = 8080,
             seed: int = 1, scheme: str = "http") -> RealisticManifest:
    """Write the whole web under ``root`` and return (and save) its manifest."""
    if hosts < 1 or pages < 2:
        raise ValueError("hosts must be >= 1 and pages >= 2")
    root_path = Path(root)
    names = [host_name(i) for i in range(hosts)]
    kinds = assign_kinds(hosts, seed)
    with_robots = [h for h, kind in enumerate(kinds) if kind in (NORMAL, "crawl-delay")]
    pick = random.Random(seed * 104_729 + hosts)
    mapped = pick.sample(with_robots, round(SITEMAP_SHARE * len(with_robots)))
    sitemap_form = {h: SITEMAP_FORMS[i % 3] for i, h in enumerate(sorted(mapped))}
    delayed = [h for h, kind in enumerate(kinds) if kind == "crawl-delay"]
    delay_of = {h: CRAWL_DELAYS[i % len(CRAWL_DELAYS)] for i, h in enumerate(delayed)}
    files_of = assign_files(hosts, seed)
    pool = _file_pool(root_path, seed)
    m: dict[str, dict] = {k: {} for k in ("robots", "pages", "category", "duplicate_of",
                                         "unreachable", "variants", "redirects", "broken",
                                         "non_html")}
    for hi, name in enumerate(names):
        rng = random.Random(seed * 1_000_003 + hi)
        plan = _plan_host(name, kinds[hi], pages, rng)
        linked: dict[str, LinkedFile] = {}
        for i in files_of[hi]:
            kind = FILE_KINDS[i]
            body = pool[i][rng.randrange(FILE_POOL)]
            _place_file(body, root_path / name / kind.uri[1:])
            linked[kind.uri] = LinkedFile(kind.category, body.stat().st_size,
                                          kind.content_type)
        plan.files = list(linked)
        base = f"{scheme}://{name}:{port}"
        robots = _robots(plan, base, sitemap_form.get(hi), delay_of.get(hi))
        base_dir = root_path / name
        for sub in ("p", "l"):
            (base_dir / sub).mkdir(parents=True, exist_ok=True)
        if robots.status == 200:
            (base_dir / "robots.txt").write_text(_robots_txt(robots), encoding="utf-8")
            (base_dir / "private").mkdir(exist_ok=True)
            (base_dir / "private" / "secret.html").write_text(
                "<!DOCTYPE html><html><body><p>robots.txt disallows this page.</p></body>"
                "</html>\n", encoding="utf-8")
        elif robots.status == 500:
            (base_dir / "robots.500").write_text("nginx answers /robots.txt with 500\n")
        category: dict[str, str] = {}
        duplicate_of: dict[str, str] = {}
        htmls: dict[int, str] = {}
        for k in range(pages):
            size = rng.randrange(MIN_PAGE_BYTES, MAX_PAGE_BYTES + 1)
            n_links = rng.randrange(MIN_LINKS, MAX_LINKS + 1)
            html = html_page(rng, f"{name} page {k}",
                             _hrefs(rng, plan, names, hi, k, port, n_links, k == 0, scheme),
                             size)
            htmls[k] = html
            uri = page_uri(k)
            (base_dir / ("index.html" if k == 0 else f"p/{k}.html")).write_text(html)
            category[uri] = "home" if k == 0 else "page"
        for j in plan.copies:
            (base_dir / "p" / f"{j}-copy.html").write_text(htmls[j])
            category[f"/p/{j}-copy.html"] = "exact-dup"
            duplicate_of[f"/p/{j}-copy.html"] = page_uri(j)
        for j in plan.nears:
            (base_dir / "p" / f"{j}-v2.html").write_text(near_duplicate(htmls[j], rng))
            category[f"/p/{j}-v2.html"] = "near-dup"
            duplicate_of[f"/p/{j}-v2.html"] = page_uri(j)
        for cat in LIST_CATS:
            for n in LIST_PAGES:
                size = rng.randrange(MIN_PAGE_BYTES, MAX_PAGE_BYTES + 1)
                n_links = rng.randrange(MIN_LINKS, MAX_LINKS + 1)
                html = html_page(rng, f"{name} {cat} list {n}",
                                 _hrefs(rng, plan, names, hi, 0, port, n_links, False, scheme),
                                 size)
                (base_dir / "l" / f"{cat}_{n}.html").write_text(html)
                category[list_uri(cat, n)] = "list"
        if robots.status == 500:
            m["unreachable"][name] = list(category)
            category, duplicate_of = {}, {}
        if sitemap_form.get(hi):
            _write_sitemaps(base_dir, base, sitemap_form[hi], list(category))
        m["robots"][name] = robots
        m["pages"][name] = list(category)
        m["category"][name] = category
        m["duplicate_of"][name] = duplicate_of
        m["variants"][name] = dict(sorted(plan.variants.items()))
        m["redirects"][name] = dict(sorted(plan.redirects.items()))
        m["broken"][name] = sorted(plan.broken + ([PRIVATE_PATH] if robots.status == 404
                                                  else []))
        m["non_html"][name] = linked
    manifest = RealisticManifest(
        root=str(root_path.resolve()), port=port, seed=seed, hosts=names,
        kinds=dict(zip(names, kinds, strict=True)), scheme=scheme, pages_per_host=pages,
        version=WEB_VERSION, **m)
    manifest.save()
    return manifest


def reuse_or_generate(root: Path, hosts: int, pages: int, port: int, seed: int,
                      scheme: str = "http") -> RealisticManifest:
    """The web of these parameters in ``root``: the one already there if its manifest
    says it was made with them by this :data:`WEB_VERSION` (then on the port it was
    made for, which must be free), else a new one on ``port``. A web is a pure function
    of its parameters, so a benchmark that reuses one crawls the same web without
    writing it again."""
    if (root / "manifest.json").exists():
        old = RealisticManifest.load(root)
        if (len(old.hosts), old.pages_per_host, old.seed, old.scheme, old.version) == (
                hosts, pages, seed, scheme, WEB_VERSION):
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", old.port))
                except OSError as exc:
                    raise SystemExit(f"{root} was made for port {old.port}, which is busy "
                                     f"({exc}); remove the folder to make it again") from exc
            return old
        shutil.rmtree(root)
    return generate(root, hosts, pages, port, seed, scheme)


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python bench/realistic_web.py ROOT [--hosts N --pages N --port P --seed S]``."""
    ap = static_web.web_arguments(__doc__.splitlines()[0] if __doc__ else None, 150, 10)
    args = ap.parse_args(argv)
    m = generate(args.root, args.hosts, args.pages, args.port, args.seed)
    static_web.write_crawl_files(m, args.root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
