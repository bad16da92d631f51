"""A Scrapy DNS resolver for the benchmark web: ``*.bench.test`` → 127.0.0.1.

Installed with ``TWISTED_DNS_RESOLVER = "scrapy_peer.resolver.BenchResolver"``
(the setting called ``DNS_RESOLVER`` before Scrapy 2.14). URLs are not
rewritten, so the ``Host`` header keeps the name and nginx serves the right
per-host root. Every other name fails with a DNS lookup error: the peer can
never reach a network outside loopback, whatever links it finds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from twisted.internet import defer
from twisted.internet.base import ReactorBase
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer  # type: ignore[import-untyped]

SUFFIX = ".bench.test"
ADDRESS = "127.0.0.1"


@implementer(IResolverSimple)
class BenchResolver:
    """Resolves ``*.bench.test`` (and ``localhost``) to 127.0.0.1, nothing else."""

    def __init__(self, reactor: ReactorBase) -> None:
        self.reactor = reactor

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: ReactorBase) -> BenchResolver:
        """Scrapy's factory hook (the crawler's settings are not needed)."""
        return cls(reactor)

    def install_on_reactor(self) -> None:
        """Make this the reactor's resolver for every TCP connection."""
        self.reactor.installResolver(cast(IResolverSimple, self))

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:
        """127.0.0.1 for the benchmark's names; a failed Deferred otherwise."""
        lowered = name.lower().rstrip(".")
        if lowered.endswith(SUFFIX) or lowered == "localhost":
            return defer.succeed(ADDRESS)
        return defer.fail(DNSLookupError(f"{name} is outside the benchmark web"))
