"""What a local test web looks like: hosts, their robots.txt flavour and behaviour.

A :class:`WebSpec` is plain data; :class:`courtier.testweb.site.TestWeb` turns
it into deterministic pages once the server's port is known. Everything here
is pure (no I/O) so the simulator and the tests can share it.

Robots flavours (``HostSpec.robots``):

``allow_all``
    200, one group for an unrelated agent (``otherbot``, disallow all) and an
    empty ``*`` group: courtier may fetch everything.
``disallow_some``
    200, ``*`` disallows ``/private/``; a ``courtier`` group disallows
    ``/private/`` *and* ``/secret`` (RFC 9309: the most specific matching
    group replaces ``*`` entirely, so it repeats ``/private/``).
``404``
    robots.txt is missing: everything is allowed.
``500``
    robots.txt fails with 500: a polite crawler fetches nothing else there.
``crawl_delay``
    200, allow all, ``Crawl-delay: N`` with ``N = HostSpec.crawl_delay``.
``redirect``
    robots.txt answers 301 to ``/robots-real.txt``, which allows all.

More flavours, never assigned by :func:`default_web` (:data:`MORE_ROBOTS_KINDS`):

``401``, ``403``
    robots.txt answers that status: "unavailable", everything is allowed.
``429``, ``503``
    robots.txt answers that status: "unreachable", nothing else may be fetched.
``redirect_chain``
    ``/robots.txt`` → 301 → ``/robots-hop/1`` → 302 → ``/robots-hop/2`` → 307 →
    ``/robots-real.txt`` (three hops, absolute and relative Locations), whose
    ``*`` group disallows ``/private/`` — so obeying it is visible.
``redirect_loop``
    ``/robots.txt`` → ``/robots-loop/a`` ⇄ ``/robots-loop/b`` forever: after 5
    hops a crawler gives up and treats robots.txt as unavailable (allow all).
``redirect_cross_host``
    ``/robots.txt`` → 301 → ``/robots.txt`` of another test host
    (``HostSpec.robots_target``, else the first other ``disallow_some`` host,
    else the first other host); that file's rules apply.

Behaviours (all off by default):

``busy_every`` / ``busy_status`` / ``retry_after`` / ``busy_after``
    every ``busy_every``-th *page* request (robots files not counted; the first
    ``busy_after`` page requests never) answers
    ``busy_status`` (429 or 503), with a ``Retry-After`` header when
    ``retry_after`` is set: ``"N"`` (delta-seconds, sent as is),
    ``"http-date+N"`` (an IMF-fixdate N seconds after the whole second that
    follows the response — so the wait is between N and N+1 seconds), or any
    other text, sent verbatim.
``slow_after`` / ``slow_latency``
    the first ``slow_after`` requests of the host (robots files included)
    wait ``latency``; every later one waits ``slow_latency``.

Extra content (all off by default; see :mod:`courtier.testweb.site`):

``extra_links``
    absolute URLs (any host, e.g. one outside the web) linked from the index.
``redirect_out``
    ``/out/{k}`` answers 301 to the k-th of these URLs; each is linked from the index.
``sitemap_pages`` / ``sitemap_lastmod``
    robots.txt (200 flavours) names ``/sitemaps/index.xml`` in a ``Sitemap:``
    line; that sitemap index lists one gzipped child, ``/sitemaps/pages.xml.gz``,
    whose urlset lists ``/s/{i}.html`` for ``i < sitemap_pages`` — pages linked
    from nowhere else — each with ``<lastmod>`` ``sitemap_lastmod + i`` days
    (POSIX seconds; None: no lastmod).
``sitemap_index_self``
    (with ``sitemap_pages``) the sitemap index also lists itself, once as its own URL
    and once spelled otherwise (upper-case scheme and host, a fragment): a loop a
    crawler must not follow more than once.
``big_sitemap``
    ``/sitemaps/big.xml`` (and gzipped, ``/sitemaps/big.xml.gz``) lists this many URLs
    ``/b/{i:06d}/xxx….html`` of about 200 characters each, with a ``<lastmod>``: about
    270 bytes an entry, so 50,000 entries make a 13 MiB sitemap. Named nowhere (a test
    seeds it); the pages are not served.
``extra_sitemaps``
    more ``Sitemap:`` lines (absolute URLs, e.g. one outside the web).
``near_duplicates``
    ``/near/{k}.html`` for ``k < near_duplicates``, linked from the index: the same
    long text but for one word, each linking to its own ``/near-leaf/{k}.html``.
``trap_fanout``
    a crawler trap: ``/trap/{n}.html`` (``n`` zero-padded to six digits) for every
    ``n``, linked from the index from ``n = 0``: one visible text on every page (an
    endless calendar of empty months), each linking to the next ``trap_fanout``
    numbers ``n·f + 1 … n·f + f``. Unbounded, so :meth:`TestWeb.expected_fetches`
    leaves it out; tests judge how many of its pages were requested.
``http_redirect``
    for a web served over HTTPS with a plain-HTTP side (``TestWebServer(...,
    plain_http=True)``): what the host's http URLs answer. ``"twin"``: every one
    (robots.txt included) 301 to the same path and query on https (a site that
    upgrades its http URLs); ``"twin_pages"``: the same but robots.txt, which answers
    404 on http (so a page is the first http URL to redirect); ``"home"``: every one 301
    to the https index (for any path but ``/``, a redirect that is not to the same URL);
    ``"serve"``: no redirect, every URL (robots.txt included) answers on http as on
    https (one server behind both schemes, each page linking the other's URLs).
    Its index then also links every ``/p/{i}.html`` as an ``http://`` URL of the plain
    port, and each page the next page's. Hosts without it answer 404 on the plain port.
    :meth:`TestWeb.expected_fetches` does not model the plain side (which GETs a crawler
    makes there depends on its upgrade rule).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from typing import Literal

from courtier.core.errors import ConfigError

RobotsKind = Literal[
    "allow_all",
    "disallow_some",
    "404",
    "500",
    "crawl_delay",
    "redirect",
    "401",
    "403",
    "429",
    "503",
    "redirect_chain",
    "redirect_loop",
    "redirect_cross_host",
]

#: every robots flavour, in the order :func:`default_web` assigns them
ROBOTS_KINDS: tuple[RobotsKind, ...] = (
    "allow_all",
    "disallow_some",
    "404",
    "500",
    "crawl_delay",
    "redirect",
)

#: flavours for dedicated tests; :func:`default_web` never assigns them
MORE_ROBOTS_KINDS: tuple[RobotsKind, ...] = (
    "401",
    "403",
    "429",
    "503",
    "redirect_chain",
    "redirect_loop",
    "redirect_cross_host",
)

#: every robots flavour
ALL_ROBOTS_KINDS: tuple[RobotsKind, ...] = ROBOTS_KINDS + MORE_ROBOTS_KINDS

#: statuses a busy host answers with
BUSY_STATUSES = (429, 503)

HttpRedirect = Literal["twin", "twin_pages", "home", "serve"]
#: what a host's plain-http URLs may answer (``HostSpec.http_redirect``)
HTTP_REDIRECTS: tuple[HttpRedirect, ...] = ("twin", "twin_pages", "home", "serve")

#: prefix of a ``retry_after`` value asking for an HTTP-date N seconds ahead
HTTP_DATE_PREFIX = "http-date+"

#: the product token whose dedicated group appears on ``disallow_some`` hosts
COURTIER_AGENT = "courtier"

_HOST_RE = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$")


@dataclass(slots=True)
class HostSpec:
    """One virtual host of the test web.

    ``name`` is a lower-case DNS name (``h00.courtier.test``); ``pages`` the
    number of ``/p/{i}.html`` pages (at least 1); ``latency`` seconds the
    server waits before answering any request of this host; ``crawl_delay``
    the ``Crawl-delay`` value written for the ``crawl_delay`` flavour;
    ``page_bytes`` the approximate size of each HTML page (text padding is
    added until the page reaches it). ``busy_every``, ``busy_status``,
    ``retry_after``, ``slow_after``, ``slow_latency`` and ``robots_target``
    are the behaviours described in the module docstring (all off by default).
    """

    name: str
    pages: int = 20
    robots: RobotsKind = "allow_all"
    latency: float = 0.0
    crawl_delay: float = 2.0
    page_bytes: int = 3000
    busy_every: int = 0
    busy_status: int = 429
    retry_after: str | None = None
    slow_after: int | None = None
    slow_latency: float = 0.0
    robots_target: str | None = None
    busy_after: int = 0
    extra_links: tuple[str, ...] = ()
    redirect_out: tuple[str, ...] = ()
    sitemap_pages: int = 0
    sitemap_lastmod: float | None = None
    sitemap_index_self: bool = False  # the sitemap index lists itself (module docstring)
    extra_sitemaps: tuple[str, ...] = ()
    near_duplicates: int = 0
    changing_pages: int = 0   # pages /p/{i}.html, i < this, change at every request
    trap_fanout: int = 0      # /trap/{n}.html: an endless trap (module docstring)
    #: > 0: /files/{i}.pdf bodies padded to this many bytes, and /video/{i}.mp4 (video/mp4,
    #: this size) linked from the index: files a crawler should not download
    media_bytes: int = 0
    #: True: pages also link each other with tracking parameters (``?utm_source=…``,
    #: ``?fbclid=…``), one URL each for a crawler that removes them (module docstring)
    tracking_links: bool = False
    big_sitemap: int = 0      # entries of /sitemaps/big.xml (module docstring)
    #: what its http URLs answer on the plain-HTTP side of an HTTPS web (module docstring)
    http_redirect: HttpRedirect | None = None

    def __post_init__(self) -> None:
        self.name = self.name.lower()
        if not _HOST_RE.match(self.name):
            raise ConfigError(f"testweb host name {self.name!r} is not a DNS name")
        if self.pages < 1:
            raise ConfigError(f"testweb host {self.name}: pages must be >= 1")
        if self.robots not in ALL_ROBOTS_KINDS:
            raise ConfigError(f"testweb host {self.name}: unknown robots kind {self.robots!r}")
        if self.latency < 0 or self.crawl_delay < 0 or self.page_bytes < 0:
            raise ConfigError(f"testweb host {self.name}: negative latency/delay/size")
        if self.busy_every < 0 or self.busy_after < 0 or self.busy_status not in BUSY_STATUSES:
            raise ConfigError(
                f"testweb host {self.name}: busy_every and busy_after must be >= 0 "
                "and busy_status 429 or 503"
            )
        if min(self.sitemap_pages, self.near_duplicates, self.changing_pages,
               self.trap_fanout, self.media_bytes, self.big_sitemap) < 0:
            raise ConfigError(f"testweb host {self.name}: negative sitemap_pages/near_duplicates")
        if self.http_redirect is not None and self.http_redirect not in HTTP_REDIRECTS:
            raise ConfigError(f"testweb host {self.name}: http_redirect must be one of "
                              f"{', '.join(HTTP_REDIRECTS)}")
        if (self.slow_after is not None and self.slow_after < 0) or self.slow_latency < 0:
            raise ConfigError(f"testweb host {self.name}: negative slow_after/slow_latency")
        retry = self.retry_after or ""
        if retry.startswith(HTTP_DATE_PREFIX) and not retry[len(HTTP_DATE_PREFIX) :].isdigit():
            raise ConfigError(
                f"testweb host {self.name}: retry_after {retry!r} "
                f"must be {HTTP_DATE_PREFIX}N with N whole seconds"
            )

    def is_busy(self, page_request: int) -> bool:
        """True when the ``page_request``-th (1-based) page request must answer busy."""
        return (self.busy_every > 0 and page_request > self.busy_after
                and page_request % self.busy_every == 0)

    def latency_for(self, request: int) -> float:
        """Seconds to wait before answering the ``request``-th (1-based) request of the host."""
        if self.slow_after is not None and request > self.slow_after:
            return self.slow_latency
        return self.latency

    def disallowed_prefixes(self, agent: str = COURTIER_AGENT) -> tuple[str, ...]:
        """Path prefixes this host's robots.txt disallows for ``agent``.

        Describes the one robots file this host serves with status 200 (for
        ``redirect_chain``: ``/robots-real.txt``); hosts whose robots.txt is
        unusable or redirects elsewhere need
        :meth:`courtier.testweb.site.TestWeb.robots_rules`. Agent matching is
        case-insensitive on the product token, as RFC 9309 requires.
        """
        if self.robots == "redirect_chain":
            return ("/private/",)
        if self.robots != "disallow_some":
            return ()
        if agent.lower() == COURTIER_AGENT:
            return ("/private/", "/secret")
        return ("/private/",)

    def sitemap_lines(self, base_url: str) -> str:
        """The ``Sitemap:`` lines of this host's robots.txt (``base_url``: its scheme://host:port)."""
        urls = ([f"{base_url}/sitemaps/index.xml"] if self.sitemap_pages else [])
        return "".join(f"Sitemap: {u}\n" for u in urls + list(self.extra_sitemaps))

    def robots_body(self, real: bool = False) -> bytes:
        """The robots.txt text served (``real``: /robots-real.txt of redirect flavours);
        without the ``Sitemap:`` lines, which need the port (:meth:`sitemap_lines`)."""
        if self.robots == "allow_all":
            text = (
                "# testweb: allow all\n"
                "User-agent: otherbot\nDisallow: /\n\nUser-agent: *\nDisallow:\n"
            )
        elif self.robots == "disallow_some":
            text = (
                "User-agent: *\nDisallow: /private/\n\n"
                f"User-agent: {COURTIER_AGENT}\nDisallow: /private/\nDisallow: /secret\n"
            )
        elif self.robots == "crawl_delay":
            delay = self.crawl_delay
            shown = str(int(delay)) if delay == int(delay) else repr(delay)
            text = f"User-agent: *\nCrawl-delay: {shown}\nDisallow:\n"
        elif self.robots == "redirect" and real:
            text = "User-agent: *\nAllow: /\n"
        elif self.robots == "redirect_chain" and real:
            text = "# testweb: after three redirects\nUser-agent: *\nDisallow: /private/\n"
        else:
            text = ""
        return text.encode()


@dataclass(slots=True)
class WebSpec:
    """A whole test web: its hosts and the seed of every random choice."""

    hosts: list[HostSpec]
    seed: int = 1
    _by_name: dict[str, HostSpec] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.hosts:
            raise ConfigError("a testweb needs at least one host")
        for host in self.hosts:
            if host.name in self._by_name:
                raise ConfigError(f"testweb host {host.name!r} appears twice")
            self._by_name[host.name] = host
        for host in self.hosts:
            if host.robots == "redirect_cross_host":
                self.robots_target(host)  # raises when there is none

    def robots_target(self, spec: HostSpec) -> HostSpec:
        """The host whose /robots.txt a ``redirect_cross_host`` host redirects to.

        ``spec.robots_target`` when set; else the first other ``disallow_some``
        host; else the first other host. Raises ConfigError when there is none.
        """
        if spec.robots_target is not None:
            target = self.host(spec.robots_target)
            if target is None or target.name == spec.name:
                raise ConfigError(
                    f"testweb host {spec.name}: robots_target {spec.robots_target!r} "
                    "must name another host of the web"
                )
            return target
        others = [h for h in self.hosts if h.name != spec.name]
        if not others:
            raise ConfigError(f"testweb host {spec.name}: redirect_cross_host needs another host")
        return next((h for h in others if h.robots == "disallow_some"), others[0])

    def host(self, name: str) -> HostSpec | None:
        """The spec of host ``name`` (case-insensitive), or None."""
        return self._by_name.get(name.lower())

    def of_kind(self, kind: RobotsKind) -> list[HostSpec]:
        """Hosts whose robots flavour is ``kind``, in spec order."""
        return [h for h in self.hosts if h.robots == kind]


def host_name(index: int, domain: str = "courtier.test") -> str:
    """The conventional name of host ``index``: ``h00.courtier.test``, ``h01…``."""
    return f"h{index:02d}.{domain}"


def default_web(
    n_hosts: int = 6,
    pages_per_host: int = 20,
    seed: int = 1,
    *,
    crawl_delay: float = 2.0,
    latency: float = 0.0,
    page_bytes: int = 3000,
    domain: str = "courtier.test",
) -> WebSpec:
    """A web of ``n_hosts`` hosts cycling through :data:`ROBOTS_KINDS`.

    Host ``i`` is named ``h{i:02d}.{domain}`` (``h00.courtier.test`` by default) and gets
    robots flavour ``ROBOTS_KINDS[i % 6]``, so the first six hosts cover every flavour.
    Shards are the host names' (core/urls.py), so ``domain`` decides which worker of a
    cluster owns which host.
    """
    if n_hosts < 1:
        raise ConfigError("default_web: n_hosts must be >= 1")
    hosts = [
        HostSpec(
            name=host_name(i, domain),
            pages=pages_per_host,
            robots=ROBOTS_KINDS[i % len(ROBOTS_KINDS)],
            latency=latency,
            crawl_delay=crawl_delay,
            page_bytes=page_bytes,
        )
        for i in range(n_hosts)
    ]
    return WebSpec(hosts=hosts, seed=seed)


def render_retry_after(value: str | None, now: float) -> tuple[str | None, float | None]:
    """The ``Retry-After`` header for a ``HostSpec.retry_after`` value at POSIX time ``now``.

    Returns ``(header value or None, seconds the header asks to wait or None)``.
    ``"N"`` gives ``("N", N)``; ``"http-date+N"`` an IMF-fixdate of
    ``ceil(now) + N`` and the exact wait to it; other text is sent verbatim,
    with the wait known only when it parses as an HTTP-date (never negative).
    """
    if value is None:
        return None, None
    if value.isdigit():
        return value, float(value)
    if value.startswith(HTTP_DATE_PREFIX):
        target = math.ceil(now) + int(value[len(HTTP_DATE_PREFIX) :])
        return formatdate(target, usegmt=True), target - now
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return value, None
    return value, max(0.0, when - now)
