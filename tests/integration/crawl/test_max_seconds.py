"""``--max-seconds`` is a bound (issue 14): at the deadline, fetches in flight are
cancelled, their URLs go back to the store, and the crawl exits 0.

The server answers robots.txt (404) and never answers a page. Fetch timeouts are
an hour (``COURTIER_TOTAL_TIMEOUT``, ``COURTIER_READ_TIMEOUT``) and the low-speed
limit is off, so nothing but the deadline can end those fetches: the process
exiting at all proves they were cancelled. The server's log shows every page
request arrived (they were in flight) before the exit; the store, read after
the exit, holds each of them QUEUED again, never fetched.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from aiohttp import web

from courtier.core.urls import canonicalize
from courtier.store.base import UrlState
from courtier.store.sqlite import SqliteStore

HOSTS = ("never-a.test", "never-b.test", "never-c.test")


@pytest.mark.timeout(300)
async def test_the_deadline_cancels_hanging_fetches_and_keeps_their_urls(
        tmp_path: Path) -> None:
    pages: list[str] = []
    forever = asyncio.Event()  # never set

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path == "/robots.txt":
            return web.Response(status=404)
        pages.append(request.host.split(":")[0])
        await forever.wait()
        raise AssertionError("unreachable")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    seeds = [f"http://{host}:{port}/page" for host in HOSTS]
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("".join(f"127.0.0.1 {host}\n" for host in HOSTS))
    env = dict(os.environ, COURTIER_TOTAL_TIMEOUT="3600", COURTIER_READ_TIMEOUT="3600",
               COURTIER_LOW_SPEED_LIMIT="0")
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "courtier", "crawl", *seeds, "--data", str(tmp_path / "d"),
            "--resolve", str(hosts), "--allow-network", "127.0.0.0/8", "--delay", "0",
            "--max-seconds", "3", "--progress", "none", env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
    finally:
        forever.set()
        await runner.cleanup()
    assert proc.returncode == 0, err.decode()
    assert sorted(pages) == sorted(HOSTS)  # all three were in flight at the deadline
    assert "max seconds" in out.decode()
    store = SqliteStore(tmp_path / "d" / "courtier.db")
    await store.open()
    try:
        rows = [await store.get_url(canonicalize(seed).url_key) for seed in seeds]
    finally:
        await store.close()
    for row in rows:
        assert row is not None
        assert row["state"] == UrlState.QUEUED, row
        assert row["last_fetch_at"] is None and row["outcome"] is None, row
