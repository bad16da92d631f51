"""A real one-shot crawl's summary says how many URLs were left for later and why."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp import web

from courtier.app import crawl
from courtier.config import build_config
from courtier.progress import summary_line


@pytest.mark.timeout(120)
async def test_a_crawl_ending_with_retries_pending_says_so(tmp_path: Path) -> None:
    async def handle(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(status=404)
        return web.Response(status=503, headers={"Retry-After": "3600"})

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text("127.0.0.1 busy.test\n")
        config = build_config(
            {"data": tmp_path / "data", "seeds": (f"http://busy.test:{port}/",),
             "resolve": hosts, "allow_network": ("127.0.0.0/8",), "delay": 0.0,
             "progress": "none", "linger": 0.0},
            environ={})
        status = await crawl(config, install_signals=False)
    finally:
        await runner.cleanup()
    assert status.left_for_later and status.queued_at_end == 1
    text = summary_line(status)
    assert "left for later: 1 URLs stay queued; 1 hosts (back-off 429/5xx: 1)" in text, text
