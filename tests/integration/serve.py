"""A one-handler aiohttp site on 127.0.0.1 and the config of a crawl of it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from courtier.core.config import CrawlConfig, build_config

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextlib.asynccontextmanager
async def serve(handle: Handler) -> AsyncIterator[int]:
    """Answer every GET with ``handle`` while the block runs; yields the port."""
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


def loopback_crawl(tmp_path: Path, names: str, seeds: tuple[str, ...],
                   **settings: Any) -> CrawlConfig:
    """A one-shot crawl of ``seeds`` whose host ``names`` resolve to 127.0.0.1."""
    hosts = tmp_path / "hosts.txt"
    hosts.write_text(f"127.0.0.1 {names}\n")
    values: dict[str, Any] = {"data": tmp_path / "data", "seeds": seeds, "resolve": hosts,
                              "allow_network": ("127.0.0.0/8",), "delay": 0.0,
                              "progress": "none", "linger": 0.0}
    return build_config(values | settings, environ={})
