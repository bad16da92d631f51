"""A simulated web: hosts with their own latency, robots.txt, Crawl-delay,
Retry-After behaviour, failure rates and shared IP addresses.

Pure and deterministic: a response depends only on the host spec, the path,
the request count and the seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from courtier.core.errors import ConnectError


@dataclass(frozen=True, slots=True)
class SimHost:
    """One simulated host. ``robots_status`` 0 means "connection refused" for robots.txt."""

    name: str
    ip: str = "192.0.2.1"
    pages: int = 20
    links_per_page: int = 5
    latency: float = 0.1
    latency_jitter: float = 0.5          # ± fraction of latency
    robots_status: int = 200
    robots_body: bytes = b"User-agent: *\nDisallow: /private/\n"
    robots_fail_until: float = 0.0       # robots.txt answers 503 until this many seconds in
    failure_rate: float = 0.0            # share of page requests answered failure_status
    failure_status: int = 503            # 503 or 429
    failures_after: int = 0              # the first this many page requests never fail
    retry_after: str | None = None       # Retry-After sent with 503/429
    slow_after: int | None = None        # after this many requests the host gets slow
    slow_latency: float = 2.0
    cross_links: int = 1                 # links per page to other hosts
    robots_later: tuple[float, bytes] | None = None  # (seconds in, new robots.txt body)
    private_after: float | None = None   # DNS answers a private address from then on
    sitemap_pages: int = 0               # pages /s/{i} listed only in /sitemap.xml (announced
                                         # by a Sitemap: line in robots.txt)
    duplicate_of: str | None = None      # serve the same page bodies as this other host
    sitemap_changefreq: str | None = None  # <changefreq> of every sitemap entry
    volatile: bool = False               # every page changes between two visits
    change_periods: tuple[float, ...] = ()  # page /p/i changes every periods[i % n] seconds
                                            # (0: never); pages carry an ETag and answer
                                            # If-None-Match with 304 while unchanged


@dataclass(frozen=True, slots=True)
class SimAnswer:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...]
    latency: float


@dataclass(slots=True)
class SimWeb:
    hosts: list[SimHost]
    seed: int = 0
    requests: dict[str, int] = field(default_factory=dict)
    page_requests: dict[str, int] = field(default_factory=dict)
    _by_name: dict[str, SimHost] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._by_name = {h.name: h for h in self.hosts}

    def host(self, name: str) -> SimHost | None:
        return self._by_name.get(name)

    def seeds(self) -> list[str]:
        return [f"http://{h.name}/" for h in self.hosts]

    def page_urls(self, host: SimHost) -> list[str]:
        return [f"http://{host.name}/"] + [f"http://{host.name}/p/{i}" for i in range(host.pages)]

    def answer(self, host_name: str, path: str, now: float,
               if_none_match: str | None = None) -> SimAnswer:
        """The response to a GET at virtual time ``now``; raises ConnectError for refusals."""
        host = self._by_name.get(host_name)
        if host is None:
            raise ConnectError(f"no such simulated host {host_name}")
        count = self.requests.get(host_name, 0) + 1
        self.requests[host_name] = count
        rng = random.Random(f"{self.seed}:{host_name}:{path}:{count}")
        latency = host.latency * (1 + host.latency_jitter * (2 * rng.random() - 1))
        if host.slow_after is not None and count > host.slow_after:
            latency = host.slow_latency
        if path == "/robots.txt":
            if now < host.robots_fail_until:
                return SimAnswer(503, b"", (), latency)
            if host.robots_status == 0:
                raise ConnectError(f"{host_name}: connection refused (simulated)")
            body = host.robots_body
            if host.sitemap_pages:
                body += f"Sitemap: http://{host.name}/sitemap.xml\n".encode()
            if host.robots_later is not None and now >= host.robots_later[0]:
                body = host.robots_later[1]
            return SimAnswer(host.robots_status, body,
                             (("Content-Type", "text/plain"),), latency)
        if path == "/sitemap.xml" and host.sitemap_pages:
            freq = (f"<changefreq>{host.sitemap_changefreq}</changefreq>"
                    if host.sitemap_changefreq else "")
            locs = "".join(f"<url><loc>http://{host.name}/s/{i}</loc>{freq}</url>"
                           for i in range(host.sitemap_pages))
            xml = ('<?xml version="1.0" encoding="UTF-8"?>'
                   f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>')
            return SimAnswer(200, xml.encode(), (("Content-Type", "application/xml"),), latency)
        page_count = self.page_requests.get(host_name, 0) + 1
        self.page_requests[host_name] = page_count
        if (host.failure_rate and page_count > host.failures_after
                and rng.random() < host.failure_rate):
            busy: tuple[tuple[str, str], ...] = ()
            if host.retry_after is not None:
                busy = (("Retry-After", host.retry_after),)
            return SimAnswer(host.failure_status, b"", busy, latency)
        # page content depends on the path only (latency and failures vary per request)
        source = host if host.duplicate_of is None else self._by_name[host.duplicate_of]
        html = self._html(source, path, random.Random(f"{self.seed}:{source.name}:{path}"))
        if host.volatile:
            html = html.replace(b"</body>", f"<p>edition {count}</p></body>".encode())
        headers: tuple[tuple[str, str], ...] = (("Content-Type", "text/html"),)
        if host.change_periods:
            version = self.page_version(host, path, now)
            etag = f'"{version}"'
            if if_none_match == etag:
                return SimAnswer(304, b"", (("ETag", etag),), latency)
            html = html.replace(b"</body>", f"<p>version {version}</p></body>".encode())
            headers += (("ETag", etag),)
        return SimAnswer(200, html, headers, latency)

    @staticmethod
    def page_version(host: SimHost, path: str, now: float) -> int:
        """How many times page ``path`` has changed by ``now`` (seconds in)."""
        if not path.startswith("/p/") or not host.change_periods:
            return 0
        index = int(path[3:]) if path[3:].isdigit() else 0
        period = host.change_periods[index % len(host.change_periods)]
        return 0 if period <= 0 else int(now // period)

    def _html(self, host: SimHost, path: str, rng: random.Random) -> bytes:
        links = [f"/p/{rng.randrange(host.pages)}" for _ in range(host.links_per_page)]
        if path == "/":
            links = [f"/p/{i}" for i in range(host.pages)] + ["/private/x"]
        for _ in range(min(host.cross_links, len(self.hosts) - 1)):
            other = self.hosts[rng.randrange(len(self.hosts))]
            if other.name == host.name:
                continue
            links.append(f"http://{other.name}/p/{rng.randrange(other.pages)}")
        anchors = "".join(f'<a href="{href}">x</a>' for href in links)
        title = f"{host.name}{path}"
        return f"<html><head><title>{title}</title></head><body>{anchors}</body></html>".encode()
