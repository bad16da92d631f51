"""``courtier crawl --workers N``: N worker processes on this machine, one crawl.

The parent queues the seeds in the store, starts N child processes (``spawn``:
each a fresh interpreter with its own event loop, so the crawl uses N cores),
and waits. Each child is an ordinary one-shot worker on the shared PostgreSQL
store with its own spool ``DATA/worker-I`` (and API port ``PORT + I`` when
``--api`` is given); the shard coordinator spreads the shards over them. A child
ends when the whole crawl is done — no URL SCHEDULED anywhere and no unfinished
cycle due within ``--linger`` — so all of them end together, like a one-shot
crawl. The first Ctrl-C (or SIGTERM) is passed on to every child: they drain and
hand their shards over; a second one aborts them.

The embedded SQLite store is refused for N > 1: it is one file under one
``--data`` guarded by a process lock, and it admits one writer at a time, so
N processes would queue on its write lock instead of using N cores.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import multiprocessing
import os
import queue
import signal
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from typing import Any

from courtier.core.config import CrawlConfig, api_address
from courtier.core.errors import ConfigError
from courtier.core.logs import log_event
from courtier.crawl.intake import SeedProblem
from courtier.crawl.status import CrawlStatus
from courtier.store.open import is_shared, store_url

log = logging.getLogger("courtier")

__all__ = ["child_configs", "run_local_cluster"]


def child_configs(config: CrawlConfig) -> list[CrawlConfig]:
    """The settings of each child: own spool and worker id, no seeds, one worker each."""
    out = []
    api_host, api_port = api_address(config.api) if config.api else ("", 0)
    for i in range(config.workers):
        api = None
        if config.api:
            api = f"{api_host}:{api_port + i if api_port else 0}"
        out.append(dataclasses.replace(
            config, data=config.data / f"worker-{i}", seeds=(), seeds_file=None, workers=1,
            expect_workers=max(config.expect_workers, config.workers),
            join=True,  # its siblings are live workers of the same store
            api=api, progress="none",
            worker_id=f"{config.worker_id}-{i}" if config.worker_id else None))
    return out


def _child(config: CrawlConfig, results: Queue[Any], verbose: bool) -> None:
    from courtier.core.logs import setup_logging

    setup_logging(config.log_format, verbose, worker=config.data.name)
    from courtier.crawl.app import run

    status = run(config, "none")
    results.put(dataclasses.asdict(status))


async def _refuse_join(config: CrawlConfig, children: list[CrawlConfig]) -> None:
    """ConfigError naming the store's live workers other than these children (a crawl
    restarted on the same --data takes its own children's ids back)."""
    from courtier.core.clock import RealClock
    from courtier.crawl.app import refuse_accidental_join, worker_id_of
    from courtier.store.open import open_store

    mine = set()
    for child in children:
        child.data.mkdir(parents=True, exist_ok=True)
        mine.add(worker_id_of(child))
    store = await open_store(store_url(config.store), config.data, RealClock())
    try:
        await refuse_accidental_join(store, mine, config.lease_ttl)
    finally:
        await store.close()


async def _queue_seeds(config: CrawlConfig,
                       report_problem: Callable[[SeedProblem], None] | None) -> None:
    from courtier.core.clock import RealClock
    from courtier.crawl.app import collect_seeds
    from courtier.crawl.intake import Intake, Scope
    from courtier.store.open import open_store

    clock = RealClock()
    intake = Intake(Scope(config, []))
    rows, problems = collect_seeds(config, intake, clock.now())
    for problem in problems:
        if report_problem is not None:
            report_problem(problem)
    if not rows:
        return
    store = await open_store(store_url(config.store), config.data, clock)
    try:
        await store.add_urls(rows)
    finally:
        await store.close()


def run_local_cluster(config: CrawlConfig,
                      report_problem: Callable[[SeedProblem], None] | None = None
                      ) -> CrawlStatus:
    """Run ``config.workers`` worker processes to the crawl's end; their summed figures."""
    if not is_shared(store_url(config.store)):
        raise ConfigError(
            f"--workers {config.workers} needs --store postgresql://…: the embedded SQLite "
            "store admits one writer process at a time (see docs/deployment.md)")
    config.data.mkdir(parents=True, exist_ok=True)
    children_configs = child_configs(config)
    if not config.join:
        asyncio.run(_refuse_join(config, children_configs))
    asyncio.run(_queue_seeds(config, report_problem))
    context = multiprocessing.get_context("spawn")
    results: Queue[Any] = context.Queue()
    verbose = logging.getLogger().isEnabledFor(logging.DEBUG)
    children: list[BaseProcess] = [
        context.Process(target=_child, args=(child, results, verbose), name=child.data.name)
        for child in children_configs
    ]
    for child in children:
        child.start()
    interrupts = 0

    def forward(signum: int, _frame: object) -> None:
        nonlocal interrupts
        interrupts += 1
        for child in children:
            if child.pid is not None and child.is_alive():
                # the first stop drains, a second one aborts (the child's own handlers)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGINT if interrupts == 1 else signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    statuses: list[dict[str, Any]] = []
    try:
        # read while they run: a child exits only once its result has left the pipe
        while any(child.is_alive() for child in children) or not results.empty():
            with contextlib.suppress(queue.Empty):
                statuses.append(results.get(timeout=0.5))
        for child in children:
            child.join()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    failed = [c.name for c in children if c.exitcode not in (0, None)]
    if failed:
        log_event(log, logging.ERROR, "worker_failed",
                  "worker processes %s ended abnormally; their shards went to the others",
                  ", ".join(failed), worker=", ".join(failed), reason="abnormal exit")
    return _summed(statuses, failed)


def _summed(statuses: list[dict[str, Any]], failed: list[str]) -> CrawlStatus:
    total = CrawlStatus()
    if not statuses:
        total.stop_reason = "no worker finished"
        return total
    total.started_at = min(s["started_at"] for s in statuses)
    total.now = max(s["now"] for s in statuses)
    for name in ("pages", "fetched", "errors", "denied", "bytes", "discovered",
                 "stale_commits"):
        setattr(total, name, sum(s[name] for s in statuses))
    total.longest_stall = max(s["longest_stall"] for s in statuses)
    total.left_for_later = any(s["left_for_later"] for s in statuses)
    total.warc_files = sorted(f for s in statuses for f in s["warc_files"])
    reasons = sorted({s["stop_reason"] for s in statuses})
    total.stop_reason = ", ".join(reasons) + (f" ({len(failed)} failed)" if failed else "")
    return total
