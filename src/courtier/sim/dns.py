"""DNS for the simulated web, answered through the crawler's real Resolver and guard.

:class:`SimDns` is a :class:`~courtier.fetch.resolver.Resolver` whose only
stand-in is the lookup itself: the simulated web answers each host's address
(its ``ip``, or a private one once ``private_after`` seconds have passed), and
everything after that — the TTL cache, the :class:`AddressGuard` refusing
private and reserved addresses — is the production code a real crawl runs.
"""

from __future__ import annotations

from collections.abc import Callable

from courtier.core.clock import Clock
from courtier.fetch.guard import AddressGuard
from courtier.fetch.resolver import Resolver
from courtier.sim.web import SimWeb

#: the documentation network simulated hosts live in; the guard blocks it unless opened
SIM_NETWORK = "192.0.2.0/24"
#: the address a host "turns" to when its DNS goes private
PRIVATE_ADDRESS = "10.0.0.7"
#: TTL of every simulated DNS record (the Resolver never caches for less than its MIN_TTL)
SIM_TTL = 10.0


class SimDns(Resolver):
    """Resolves simulated host names; ``elapsed()`` is seconds since the crawl began."""

    def __init__(self, web: SimWeb, clock: Clock, elapsed: Callable[[], float]) -> None:
        super().__init__(AddressGuard(allow=[SIM_NETWORK]), clock=clock)
        self.web = web
        self.elapsed = elapsed
        self.answers: list[tuple[str, str]] = []  # (name, address) of every lookup made

    async def _lookup(self, name: str) -> tuple[list[str], float | None]:
        host = self.web.host(name)
        if host is None:
            return [], None
        address = host.ip
        if host.private_after is not None and self.elapsed() >= host.private_after:
            address = PRIVATE_ADDRESS
        self.answers.append((name, address))
        return [address], SIM_TTL
