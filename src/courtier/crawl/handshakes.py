"""TLS handshakes counted per host: the transport reports, this counts.

:class:`HandshakeCounter` is given to the transport as its ``on_tls_handshake``
observer (``fetch/aiohttp_transport.py``). Each report is one completed TLS
handshake, that is one new connection: a request sent over a kept-alive connection
makes none. It goes to ``courtier_tls_handshakes_total{host,session}`` (the first
:data:`~courtier.crawl.metrics.HANDSHAKE_HOSTS` hosts by their own label, later ones
as ``other``) and to the host's live state (``tls_handshakes``, ``tls_resumed``:
shown by ``courtier domain stats`` and ``GET /v1/domains/{domain}/stats`` while the
crawl runs), whose host key is read off the URL: transport URLs are the leases'
canonical URLs, which start with their host key and always have a path.
"""

from __future__ import annotations

from courtier.crawl.metrics import CrawlMetrics
from courtier.frontier.scheduler import Frontier


def host_key_prefix(url: str) -> str:
    """The host key of a canonical URL: everything before its path."""
    start = url.find("/", url.find("//") + 2)
    return url if start < 0 else url[:start]


class HandshakeCounter:
    """Counts each TLS handshake against its host (metric and live host state)."""

    def __init__(self, frontier: Frontier, metrics: CrawlMetrics) -> None:
        self.frontier = frontier
        self.metrics = metrics

    def __call__(self, url: str, resumed: bool) -> None:
        host_key = host_key_prefix(url)
        self.metrics.tls_handshake(host_key, resumed)
        host = self.frontier.hosts.get(host_key)
        if host is not None:
            host.tls_handshakes += 1
            if resumed:
                host.tls_resumed += 1
