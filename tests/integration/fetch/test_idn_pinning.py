"""DNS pinning of internationalised names: one checked lookup per fetch, by the ASCII name."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from courtier.core.urls import canonicalize
from courtier.fetch.aiohttp_transport import AiohttpTransport
from courtier.fetch.guard import AddressGuard
from courtier.fetch.resolver import Resolver
from courtier.fetch.transport import FetchRequest
from tests.integration.fetch.test_aiohttp_transport import FAST, LOOPBACK, Web


class CountingResolver(Resolver):
    """Answers one name from a table (no network) and records every DNS query."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        super().__init__(AddressGuard(allow=LOOPBACK))
        self.answers = answers
        self.lookups: list[str] = []
        self.resolves: list[str] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.resolves.append(host)
        return await super().resolve(host, port)

    async def _lookup(self, name: str) -> tuple[list[str], float | None]:
        self.lookups.append(name)
        return list(self.answers.get(name, [])), None


@pytest.fixture
async def site() -> AsyncIterator[Web]:
    server = Web()
    await server.start()
    yield server
    await server.close()


async def test_idn_host_is_resolved_once_and_pinned(site: Web) -> None:
    resolver = CountingResolver({"xn--bcher-kva.test": ["127.0.0.1"]})
    client = AiohttpTransport(resolver)
    try:
        url = canonicalize(site.url("/ok", host="bücher.test")).url
        assert "xn--bcher-kva.test" in url  # canonical URLs carry the punycode name
        request = FetchRequest(url, (("User-Agent", "courtier-test/1"),))
        response = await asyncio.wait_for(client.fetch(request, FAST), 15)
    finally:
        await client.close()
        await resolver.close()
    assert response.status == 200
    assert resolver.lookups == ["xn--bcher-kva.test"]
    assert resolver.resolves == ["xn--bcher-kva.test"]  # aiohttp used the pinned addresses
    assert site.host_headers[-1].startswith("xn--bcher-kva.test")
