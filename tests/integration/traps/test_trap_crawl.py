"""The real crawler against a real trap host on loopback: every trap stays within
budget while the host's ordinary pages are all fetched."""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from courtier.core.config import build_config
from courtier.crawl.app import crawl
from tests.integration.traps.web import ORDINARY, TrapSite

BUDGET = 200  # pages per trap area


async def serve(site: TrapSite) -> tuple[web.AppRunner, int, list[str]]:
    log: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        path = request.raw_path
        log.append(path)
        if path == "/robots.txt":
            return web.Response(status=404)
        page = site.page(path)
        return web.Response(status=page.status, body=page.body, content_type="text/html")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port, log


@pytest.mark.timeout(150)
async def test_traps_are_throttled_and_ordinary_pages_fetched(tmp_path: Path) -> None:
    runner, port, log = await serve(TrapSite())
    try:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text("127.0.0.1 trap.test\n")
        config = build_config({
            "data": tmp_path / "data", "seeds": (f"http://trap.test:{port}/",),
            "resolve": hosts, "allow_network": ("127.0.0.0/8",), "delay": 0.0,
            "progress": "none", "linger": 0.0, "max_pages": 3000, "api": "127.0.0.1:0",
        }, environ={})
        api: list[str] = []
        task = asyncio.create_task(crawl(config, install_signals=False, announce=api.append))
        report: dict[str, object] = {}
        async with aiohttp.ClientSession() as session:
            for _ in range(600):  # bounded: 30 s
                await asyncio.sleep(0.05)
                if task.done() or not api:
                    continue
                url = f"{api[0]}v1/domains/trap.test:{port}/stats"
                async with session.get(url) as resp:
                    if resp.status != 200:
                        continue
                    report = await resp.json()
                live = report["hosts"][0]["live"]  # type: ignore[index]
                if live and len(live["throttled_templates"]) >= 2:
                    break
        status = await task
    finally:
        await runner.cleanup()
    live = report["hosts"][0]["live"]  # type: ignore[index]
    reasons = {t["template"]: t["reason"] for t in live["throttled_templates"]}
    assert len(reasons) >= 2 and all(reasons.values())  # the API reports what was throttled
    assert status.stop_reason == "nothing due"  # ended by itself, not by --max-pages
    areas = collections.Counter(path.split("/")[1].split("?")[0] for path in log)
    assert {f"/p/{i}" for i in range(1, ORDINARY + 1)} <= set(log)
    for area in ("cal", "loop", "s", "shop"):
        assert 0 < areas[area] <= BUDGET, (area, areas[area])
