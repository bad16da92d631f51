"""The test web's oracle: what a correct polite crawler of it fetches, as a mixin of
:class:`~courtier.testweb.site.TestWeb`. It walks the model (pure: no I/O, no clock)
the way RFC 9309 and the link rules say a crawler must: robots.txt first, with its
redirects, then every followable link and redirect its rules allow, traps left out.
"""

from __future__ import annotations

import posixpath
from collections import deque
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from courtier.testweb.links import HtmlPage
from courtier.testweb.responses import PageResponse, normalize_path
from courtier.testweb.spec import COURTIER_AGENT, WebSpec

ROBOTS_REDIRECT_LIMIT = 5
_HTML_TYPES = ("text/html", "application/xhtml+xml")
ROBOTS_WITH_FILE = ("allow_all", "disallow_some", "crawl_delay", "redirect", "redirect_chain")


class CrawlOracle:
    """The expected fetches and robots.txt chains; the attributes are the web's."""

    spec: WebSpec

    if TYPE_CHECKING:  # TestWeb's (site.py); no stub may shadow them
        def page(self, host: str, path_qs: str) -> PageResponse: ...

        def url(self, host: str, path: str) -> str: ...

        def seeds(self) -> list[str]: ...

        def robots_url(self, host: str) -> str: ...

        def html_model(self, host: str, path: str) -> HtmlPage | None: ...

        def sitemap_urls(self, host: str) -> list[tuple[str, float | None]]: ...

    def robots_chain(self, host: str) -> list[tuple[str, int]]:
        """(URL, status) of every robots fetch a correct crawler makes for ``host``, in order.

        It starts at ``/robots.txt`` and follows each 3xx ``Location`` (resolved
        against the URL it came from), ending at the first non-3xx answer or
        after :data:`ROBOTS_REDIRECT_LIMIT` redirects have been followed.
        """
        url = self.robots_url(host)
        chain: list[tuple[str, int]] = []
        while True:
            parts = urlsplit(url)
            resp = self.page(parts.hostname or "", parts.path or "/")
            chain.append((url, resp.status))
            location = resp.header("Location")
            if not 300 <= resp.status < 400 or location is None:
                return chain
            if len(chain) > ROBOTS_REDIRECT_LIMIT:
                return chain
            url = _resolve(url, location)

    def robots_rules(self, host: str, agent: str = COURTIER_AGENT) -> tuple[str, ...] | None:
        """Disallowed path prefixes in force on ``host``; None = nothing may be fetched.

        RFC 9309 §2.3.1: 2xx → the file's rules; 4xx (429 excepted) or too
        many redirects → allow all; 5xx or 429 → disallow all.
        """
        url, status = self.robots_chain(host)[-1]
        if 200 <= status < 300:
            owner = self.spec.host(urlsplit(url).hostname or "")
            return () if owner is None else owner.disallowed_prefixes(agent)
        if 300 <= status < 500 and status != 429:
            return ()
        return None

    def _crawl(self, agent: str) -> tuple[set[str], set[str]]:
        # a Sitemap: line is served only where robots.txt is the host's own 200 file
        starts = self.seeds() + [self.url(h.name, "/sitemaps/index.xml")
                                 for h in self.spec.hosts
                                 if h.sitemap_pages and h.robots in ROBOTS_WITH_FILE]
        seen = set(starts)
        queue = deque(starts)
        fetched: set[str] = set()
        denied: set[str] = set()
        rules_of = {h.name: self.robots_rules(h.name, agent) for h in self.spec.hosts}
        while queue:
            url = queue.popleft()
            parts = urlsplit(url)
            spec = self.spec.host(parts.hostname or "")
            if spec is None:
                continue
            path = parts.path or "/"
            rules = rules_of[spec.name]
            if rules is None or path.startswith(rules):
                denied.add(url)
                continue
            fetched.add(url)
            resp = self.page(spec.name, path)
            targets: list[str] = []
            location = resp.header("Location")
            if 300 <= resp.status < 400 and location is not None:
                targets.append(location if "://" in location else self.url(spec.name, location))
            if path == "/sitemaps/index.xml" and spec.sitemap_pages:
                targets.append(self.url(spec.name, "/sitemaps/pages.xml.gz"))
            elif path == "/sitemaps/pages.xml.gz" and spec.sitemap_pages:
                targets += [url for url, _ in self.sitemap_urls(spec.name)]
            model = self.html_model(spec.name, path) if resp.status == 200 else None
            if model is not None and not model.meta_nofollow:
                targets += [link.target for link in model.links if link.follow]
            for target in targets:
                if target not in seen and "/trap/" not in target:  # unbounded: not expected
                    seen.add(target)
                    queue.append(target)
        return fetched, denied

    def expected_fetches(self, agent: str = COURTIER_AGENT) -> set[str]:
        """Canonical URLs a correct polite crawler GETs, robots.txt files excluded.

        Seeds are every host's ``/``. A URL counts when it is reachable through
        followable links or redirect Locations from fetched URLs and allowed by
        its host's robots.txt for ``agent`` (:meth:`robots_rules`); nothing of a
        host whose robots.txt is unreachable (500, 503, 429) counts. Robots
        fetches (:meth:`robots_chain`) are excluded. Busy answers do not change
        the set: a patient crawler retries those URLs and gets them.
        """
        return self._crawl(agent)[0]

    def expected_archived(self, agent: str = COURTIER_AGENT) -> set[str]:
        """The expected fetches whose response a crawler that downloads only HTML archives:
        all but 2xx answers of another type (the PDFs and PNGs), which it asks for and
        drops after their headers (docs/fetch.md, "Only HTML is downloaded"). Sitemap
        files (named ``*.xml`` or ``*.xml.gz``) are read whatever their type."""
        archived: set[str] = set()
        for url in self.expected_fetches(agent):
            parts = urlsplit(url)
            path = parts.path or "/"
            resp = self.page(parts.hostname or "", path)
            kind = (resp.header("Content-Type") or "").split(";", 1)[0].strip().lower()
            if 200 <= resp.status < 300 and kind not in _HTML_TYPES \
                    and not path.endswith((".xml", ".xml.gz")):
                continue
            archived.add(url)
        return archived

    def expected_denied(self, agent: str = COURTIER_AGENT) -> set[str]:
        """Discovered URLs a polite crawler must *not* fetch because of robots.txt."""
        return self._crawl(agent)[1]


def _resolve(base: str, location: str) -> str:
    """``location`` made absolute against ``base`` (enough for the Locations served here)."""
    if "://" in location:
        return location
    parts = urlsplit(base)
    path = (
        location
        if location.startswith("/")
        else posixpath.join(posixpath.dirname(parts.path), location)
    )
    return f"{parts.scheme}://{parts.netloc}{normalize_path(path)}"
