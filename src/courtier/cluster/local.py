"""``courtier crawl --workers N``: N worker processes on this machine, one crawl.

The parent queues the seeds in the store, starts N child processes (``spawn``:
each a fresh interpreter with its own event loop, so the crawl uses N cores),
and waits. Each child is an ordinary one-shot worker on the shared PostgreSQL
store with its own spool ``DATA/worker-I`` (and API port ``PORT + I`` when
``--api`` is given); the shard coordinator spreads the shards over them. No child takes
a shard before every child has registered in the store (or ended): the parent opens
their start gate then (cluster/start_gate.py), so each takes its own share at once and
none takes all and hands most over. A child finds the crawl over when the whole crawl is
done — no URL SCHEDULED anywhere and no unfinished cycle due within ``--linger`` — and
says so to the parent; it leaves once every child has said so (or ended), which the
parent tells them through their end gate (cluster/end_gate.py), so all of them end
together, like a one-shot crawl, and none gains the shards of another that left. The
first Ctrl-C (or SIGTERM) is passed on to every child: they drain and hand their shards
over; a second one aborts them.

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
import sys
from collections.abc import Callable, Mapping
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from typing import Any

from courtier.archive.roots import remember_roots
from courtier.cluster.end_gate import EndKeeper, SiblingEndGate
from courtier.cluster.local_progress import (
    BUSY,
    FINAL,
    OVER,
    READY,
    REGISTERED,
    ChildReporter,
    ClusterProgress,
)
from courtier.cluster.start_gate import Flag, GateKeeper, SiblingGate
from courtier.core.config import CrawlConfig, api_address
from courtier.core.errors import ConfigError
from courtier.core.logs import NOTICE_LOGGER, log_event
from courtier.crawl.intake import SeedProblem
from courtier.crawl.progress import progress_stream
from courtier.crawl.status import CrawlStatus, summed_status
from courtier.store.open import is_shared, store_url

log = logging.getLogger("courtier")
notice = logging.getLogger(NOTICE_LOGGER)

#: the exit status of a child stopped by a second signal outside its crawl's handlers
EXIT_ABORTED = 130

__all__ = ["child_configs", "run_local_cluster", "split_pages", "warc_folders"]


def child_configs(config: CrawlConfig) -> list[CrawlConfig]:
    """The settings of each child: own spool and worker id, no seeds, one worker each.

    Its siblings are awaited through the start gate, not ``expect_workers``, which keeps
    the user's value: workers started elsewhere that the crawl should wait for too.
    ``--max-pages`` is the crawl's, not each child's: it is split between the children
    (:func:`split_pages`), so the crawl never issues more page fetches than it says."""
    out = []
    pages = split_pages(config.max_pages, config.workers)
    api_host, api_port = api_address(config.api) if config.api else ("", 0)
    for i in range(config.workers):
        api = None
        if config.api:
            api = f"{api_host}:{api_port + i if api_port else 0}"
        out.append(dataclasses.replace(
            config, data=config.data / f"worker-{i}", seeds=(), seeds_file=None, workers=1,
            join=True,  # its siblings are live workers of the same store
            api=api, progress="none", max_pages=pages[i],
            worker_id=f"{config.worker_id}-{i}" if config.worker_id else None))
    return out


def split_pages(max_pages: int | None, children: int) -> list[int | None]:
    """Each child's share of ``max_pages``: as equal as whole numbers go, the first ones
    taking the remainder; ``None`` (no limit) for all when there is none. A child whose
    share is 0 ends at once and leaves its shards to its siblings."""
    if max_pages is None:
        return [None] * children
    share, extra = divmod(max_pages, children)
    return [share + (1 if i < extra else 0) for i in range(children)]


class _ChildSignals:
    """A child's SIGINT/SIGTERM outside its crawl's own handlers: while it starts (imports,
    the store opened) and while it closes. The first asks the crawl to stop as soon as
    it runs (``stop``); a second exits at once, as a second Ctrl-C does in a crawl."""

    def __init__(self) -> None:
        self.stop = asyncio.Event()

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self.stop.is_set():
            raise KeyboardInterrupt
        self.stop.set()


def _child(config: CrawlConfig, messages: Queue[Any], verbose: bool, opened: Flag,
           ended: Flag) -> None:
    # the parent alone hears the terminal's Ctrl-C, and passes each signal on once: a
    # child in the terminal's process group would get every Ctrl-C twice (an abort)
    os.setpgrp()
    signals = _ChildSignals()
    signals.install()
    name = config.data.name
    messages.put((READY, name, {}))
    gate = SiblingGate(opened, lambda: messages.put((REGISTERED, name, {})))
    end_gate = SiblingEndGate(ended, lambda over: messages.put((OVER if over else BUSY,
                                                                name, {})))
    try:
        from courtier.core.logs import setup_logging

        setup_logging(config.log_format, verbose, worker=config.data.name)
        from courtier.crawl.app import run

        status = run(config, "none", on_progress=ChildReporter(name, messages.put),
                     stop=signals.stop, start_gate=gate, end_gate=end_gate)
    except KeyboardInterrupt:  # a second signal before or after the crawl: exit now
        sys.exit(EXIT_ABORTED)
    messages.put((FINAL, name, dataclasses.asdict(status)))


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
    remember_roots(config.data, warc_folders(config))
    children_configs = child_configs(config)
    if not config.join:
        asyncio.run(_refuse_join(config, children_configs))
    asyncio.run(_queue_seeds(config, report_problem))
    context = multiprocessing.get_context("spawn")
    messages: Queue[Any] = context.Queue()
    verbose = logging.getLogger().isEnabledFor(logging.DEBUG)
    opened = context.Event()  # the children's start gate
    gate = GateKeeper([child.data.name for child in children_configs], opened)
    ended = context.Event()  # their end gate: every child found the crawl over, or ended
    end = EndKeeper([child.data.name for child in children_configs], ended)
    children: list[BaseProcess] = [
        context.Process(target=_child, args=(child, messages, verbose, opened, ended),
                        name=child.data.name)
        for child in children_configs
    ]
    # started with SIGINT ignored (inherited through the exec) until each installs its own
    # handlers and says so (READY): a Ctrl-C meanwhile is passed on then
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    received: list[int] = []
    ready: set[str] = set()

    def send(child: BaseProcess, signum: int) -> None:
        if child.pid is not None and child.is_alive():
            # the first stop drains, a second one aborts (the child's own handlers)
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signum)

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        for child in children:
            if child.name in ready:
                send(child, signum)

    try:
        for child in children:
            child.start()
    finally:
        for sig in previous:
            signal.signal(sig, forward)
    display = ClusterProgress(len(children), config.progress, progress_stream(config))
    statuses: dict[str, dict[str, Any]] = {}
    try:
        # read while they run: a child exits only once its messages have left the pipe
        while any(child.is_alive() for child in children) or not messages.empty():
            with contextlib.suppress(queue.Empty):
                kind, name, figures = messages.get(timeout=0.5)
                if kind == FINAL:
                    statuses[name] = figures
                elif kind == READY:
                    ready.add(name)
                    for signum in received[:2]:  # signals that came while it started
                        send(next(c for c in children if c.name == name), signum)
                elif kind == REGISTERED:
                    gate.registered(name)
                elif kind in (OVER, BUSY):
                    end.said(name, kind == OVER)
                else:
                    display.update(name, figures)
            alive = {c.name: c.is_alive() for c in children}
            if gate.waiting:  # a child that ended before registering is not awaited
                gate.ended(alive)
            end.ended(alive)  # nor, at the end, one that died or stopped
            display.show()
        for child in children:
            child.join()
    finally:
        display.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    failed = {c.name or "": c.exitcode for c in children
              if not _ended_well(c.exitcode, c.name in statuses, received)}
    if failed:
        _report_failed(failed, len(children), len(received), config.lease_ttl)
    return _summed(list(statuses.values()), list(failed))


def _ended_well(exitcode: int | None, reported: bool, forwarded: list[int]) -> bool:
    """A child ended well when it exited 0, or when it had sent its final figures and then
    a signal passed on from the user ended it (its exit, not its crawl, was cut short)."""
    if exitcode == 0:
        return True
    return reported and exitcode is not None and (
        -exitcode in forwarded or exitcode == EXIT_ABORTED)


def _report_failed(failed: Mapping[str, int | None], workers: int, interrupts: int,
                   lease_ttl: float) -> None:
    """One line on the worker processes that did not end normally, saying what becomes of
    what they held: a sibling still running takes their shards over; otherwise a run on
    the same store does, once their leases have lapsed."""
    names = ", ".join(failed)
    codes = ", ".join(f"{name} {code}" for name, code in failed.items())
    later = (f"a run on the same --store resumes what they held once their shard leases "
             f"lapse (--lease-ttl {lease_ttl:g} s)")
    if interrupts >= 2:
        log_event(notice, logging.INFO, "workers_aborted",
                  "worker processes %s stopped at once (a second signal): %s",
                  names, later, worker=names, reason="aborted")
    elif len(failed) < workers:
        log_event(log, logging.ERROR, "worker_failed",
                  "worker processes %s ended abnormally (exit codes: %s); the workers still "
                  "running took their shards over, and %s", names, codes, later,
                  worker=names, reason="abnormal exit")
    else:
        log_event(log, logging.ERROR, "worker_failed",
                  "every worker process ended abnormally (exit codes: %s), so no other "
                  "took their shards over: %s", codes, later, worker=names,
                  reason="abnormal exit")


def _summed(statuses: list[dict[str, Any]], failed: list[str]) -> CrawlStatus:
    if not statuses:
        total = CrawlStatus()
        total.stop_reason = "no worker finished"
        return total
    total = summed_status([CrawlStatus(**figures) for figures in statuses])
    reasons = sorted({s["stop_reason"] for s in statuses})
    total.stop_reason = ", ".join(reasons) + (f" ({len(failed)} failed)" if failed else "")
    return total


def warc_folders(config: CrawlConfig) -> list[str]:
    """Where the worker processes write their WARC files: ``--archive`` when given (all
    of them; a remote one is spooled under each child's folder), else ``DATA/worker-I/warc``."""
    if config.archive:
        return [config.archive]
    return [str(child.data / "warc") for child in child_configs(config)]
