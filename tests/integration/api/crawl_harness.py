"""A live crawl of the local test web with a handle on its Worker, for API tests.

Assembled like :func:`courtier.crawl.app.crawl` (same store, transport, archive and
worker), but the worker runs as a task so tests can call the admin API while
it crawls. ``continuous=True`` keeps it alive until the context exits; every
run is bounded by ``max_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from courtier.api.server import make_app, start_api
from courtier.api.worker_control import WorkerControl
from courtier.archive.warc import WarcWriter
from courtier.core.clock import RealClock
from courtier.core.config import build_config
from courtier.crawl.app import collect_seeds, host_ip_lookup, known_urls_for
from courtier.crawl.intake import Intake, Scope
from courtier.crawl.worker import Worker
from courtier.fetch.aiohttp_transport import AiohttpTransport
from courtier.fetch.guard import AddressGuard
from courtier.fetch.resolver import Resolver, load_hosts_file
from courtier.store.base import Store
from courtier.store.sqlite import SqliteStore
from courtier.testweb import TestWebServer, WebSpec


@dataclass
class LiveCrawl:
    server: TestWebServer
    worker: Worker
    control: WorkerControl
    api_url: str
    task: asyncio.Task[Any]


@contextlib.asynccontextmanager
async def live_crawl(
    spec: WebSpec, tmp: Path, token: str | None = None,
    prepare: Callable[[Store, TestWebServer], Awaitable[None]] | None = None, **flags: Any
) -> AsyncIterator[LiveCrawl]:
    """Serve ``spec``, crawl it with the admin API on a free loopback port, stop on exit.

    ``prepare`` runs on the open store before the crawl starts (policies, rows), and
    before the resolver reads ``tmp/hosts.txt`` (a test may add names to it)."""
    async with TestWebServer(spec) as server:
        resolve = tmp / "hosts.txt"
        resolve.write_text(server.web.hosts_file_text())
        values: dict[str, Any] = {
            "data": tmp / "data",
            "seeds": tuple(server.web.seeds()),
            "resolve": resolve,
            "allow_network": ("127.0.0.0/8",),
            "delay": 0.1,
            "progress": "none",
            "concurrency": 8,
            "linger": 0.0,
            "continuous": True,
            "max_seconds": 30.0,
        }
        values.update(flags)
        config = build_config(values)
        clock = RealClock()
        store = SqliteStore(config.data / "courtier.db", clock=clock)
        (config.data / "warc").mkdir(parents=True, exist_ok=True)
        archive = WarcWriter(str(config.data / "warc"), software=config.user_agent)
        await store.open()
        if prepare is not None:  # (it may add names to the hosts file, read below)
            await prepare(store, server)
        resolver = Resolver(
            AddressGuard(allow=config.allow_network),
            overrides=load_hosts_file(str(resolve)),
            clock=clock,
        )
        transport = AiohttpTransport(resolver, limit_per_host=1)
        runner = None
        task: asyncio.Task[Any] | None = None
        try:
            intake = Intake(Scope(config, []), known=known_urls_for(config))
            rows, _ = collect_seeds(config, intake, clock.now())
            worker = Worker(
                config,
                store,
                transport,
                archive,
                clock,
                intake,
                resolve_ip=host_ip_lookup(resolver),
            )
            await worker.add_seeds(rows)
            control = WorkerControl(worker)
            app = make_app(control, worker.metrics.render, token)
            runner, port = await start_api(app)
            task = asyncio.create_task(worker.run())
            yield LiveCrawl(server, worker, control, f"http://127.0.0.1:{port}", task)
        finally:
            if task is not None:
                worker.request_stop("test over")
                await asyncio.wait_for(task, 20)
            if runner is not None:
                await runner.cleanup()
            archive.close()
            await transport.close()
            await store.close()
