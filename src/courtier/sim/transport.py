"""A :class:`~courtier.fetch.transport.Transport` over the simulated web, in virtual time."""

from __future__ import annotations

import asyncio

from courtier.core.clock import Clock
from courtier.core.errors import ConnectError
from courtier.fetch.transport import FetchLimits, FetchRequest, FetchResponse
from courtier.sim.dns import SimDns
from courtier.sim.observer import Observer
from courtier.sim.web import SimWeb


def split_url(url: str) -> tuple[str, str]:
    """(host, path+query) of an absolute http URL."""
    rest = url.split("://", 1)[1]
    slash = rest.find("/")
    authority, path = (rest, "/") if slash < 0 else (rest[:slash], rest[slash:])
    return authority.split(":", 1)[0], path


class SimTransport:
    """Answers from :class:`SimWeb` after the host's latency; every request is observed.

    Like the real transport, it resolves the host first through a real
    :class:`~courtier.fetch.resolver.Resolver` (:class:`SimDns`), whose guard refuses
    a blocked address before any connection: the host then sees nothing.
    """

    def __init__(self, web: SimWeb, clock: Clock, observer: Observer) -> None:
        self.web = web
        self.clock = clock
        self.observer = observer
        self.t0: float | None = None     # simulated hosts see time since the first request
        self.resolver = SimDns(web, clock, self._elapsed)

    def _elapsed(self) -> float:
        return 0.0 if self.t0 is None else self.clock.now() - self.t0

    async def fetch(self, request: FetchRequest, limits: FetchLimits) -> FetchResponse:
        host_name, path = split_url(request.url)
        host = self.web.host(host_name)
        if host is None:
            raise ConnectError(f"no such simulated host {host_name}")
        start = self.clock.now()
        if self.t0 is None:
            self.t0 = start
        await self.resolver.resolve(host_name, 80)  # BlockedAddressError: no request made
        self.observer.on_start(host_name, host.ip, path, start)
        try:
            etag = next((v for k, v in request.headers if k.lower() == "if-none-match"), None)
            answer = self.web.answer(host_name, path, start - self.t0, etag)
        except ConnectError:
            await asyncio.sleep(host.latency)
            self.observer.on_end(host_name, host.ip, path, start, self.clock.now(), 0)
            raise
        try:
            await asyncio.sleep(min(answer.latency, limits.total_timeout))
        except asyncio.CancelledError:  # the client went away: the server sees a drop
            self.observer.on_end(host_name, host.ip, path, start, self.clock.now(), 0,
                                 dropped=True)
            raise
        end = self.clock.now()
        retry_after = next((v for k, v in answer.headers if k == "Retry-After"), None)
        self.observer.on_end(host_name, host.ip, path, start, end, answer.status, answer.body,
                             retry_after)
        return FetchResponse(
            url=request.url, status=answer.status, reason="", http_version="1.1",
            headers=list(answer.headers), raw_body=answer.body, body=answer.body,
            request_headers=list(request.headers), remote_ip=host.ip, started_at=start,
            ttfb=answer.latency, elapsed=end - start,
        )

    async def close(self) -> None:
        return None
