"""Assembly: build the store, transport, archive and worker for one crawl and run it.

Also owns process concerns: the data-dir lock (one crawl process per
``--data``), signals (first Ctrl-C drains, second exits at once), WARC
recovery on start-up, and the event loop (uvloop when available).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import functools
import gc
import logging
import os
import re
import secrets
import signal
import socket
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

from courtier.archive.recovery import recover_warc_dir
from courtier.archive.roots import remember_roots
from courtier.archive.spool import SpooledArchive, is_remote, storage_options
from courtier.archive.warc import WarcWriter
from courtier.cluster.coordinator import LeaseSettings, ShardCoordinator
from courtier.cluster.end_gate import CrawlEnd, EndGate
from courtier.cluster.membership import live_others
from courtier.cluster.start_gate import StartGate
from courtier.cluster.timed_store import with_call_timeout
from courtier.core.clock import Clock, RealClock
from courtier.core.config import CrawlConfig, api_address
from courtier.core.errors import ConfigError, FetchError, InvalidURL
from courtier.core.logs import NOTICE_LOGGER, log_event
from courtier.core.urls import canonicalize, registrable_domain
from courtier.crawl.handshakes import HandshakeCounter
from courtier.crawl.intake import Intake, Scope, SeedProblem, read_seed_lines
from courtier.crawl.loopwatch import LoopLagMonitor, log_tasks
from courtier.crawl.metrics import CrawlMetrics
from courtier.crawl.outbox_retention import RETENTION_SHARD, OutboxRetention
from courtier.crawl.progress import Progress, progress_stream
from courtier.crawl.status import STOP_REASONS, CrawlStatus
from courtier.crawl.worker import Worker
from courtier.dedup.known_urls import KnownUrls
from courtier.fetch.aiohttp_transport import AiohttpTransport
from courtier.fetch.guard import AddressGuard
from courtier.fetch.resolver import Resolver, load_hosts_file
from courtier.fetch.write_pacer import AddressPacer
from courtier.frontier.trap_state import ShardedTemplateTracker
from courtier.frontier.traps import trap_rules_from
from courtier.store.base import NewUrl, Store
from courtier.store.open import is_shared, open_store, store_url
from courtier.store.postgres.dsn import STALLED_TRANSACTION_TIMEOUT

log = logging.getLogger("courtier")
notice = logging.getLogger(NOTICE_LOGGER)
T = TypeVar("T")


@contextlib.contextmanager
def data_dir_lock(data: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``DATA/courtier.lock`` for the crawl's lifetime."""
    data.mkdir(parents=True, exist_ok=True)
    handle = (data / "courtier.lock").open("a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ConfigError(
                f"--data {data}: another courtier process is using this directory"
            ) from None
        yield
    finally:
        handle.close()


def collect_seeds(config: CrawlConfig, intake: Intake, now: float
                  ) -> tuple[list[NewUrl], list[SeedProblem]]:
    rows, problems = intake.seed_urls(
        [(i + 1, s) for i, s in enumerate(config.seeds)], "argument", now)
    if config.seeds_file is not None:
        try:
            lines = read_seed_lines(config.seeds_file)
        except OSError as exc:
            raise ConfigError(f"--seeds-file {config.seeds_file}: {exc.strerror}") from None
        more, bad = intake.seed_urls(lines, str(config.seeds_file), now)
        rows += more
        problems += bad
    return rows, problems


async def crawl(
    config: CrawlConfig,
    progress: Callable[[CrawlStatus], None] | None = None,
    report_problem: Callable[[SeedProblem], None] | None = None,
    install_signals: bool = True,
    announce: Callable[[str], None] | None = None,
    clock: Clock | None = None,
    stop: asyncio.Event | None = None,
    start_gate: StartGate | None = None,
    end_gate: EndGate | None = None,
) -> CrawlStatus:
    """Run one crawl to its end (nothing due, a limit, or a stop signal).

    ``clock`` (tests only) replaces the real clock everywhere: store, resolver,
    frontier, worker. ``stop`` (an embedder's): once set, the crawl stops as on
    SIGTERM (no new requests, in-flight fetches finish, everything committed).
    ``start_gate`` (a worker process of ``crawl --workers N``): no shard is taken before
    it opens (cluster/start_gate.py); ``end_gate`` (the same): a crawl found over is left
    only once it opens (cluster/end_gate.py)."""
    data = config.data
    # the Public Suffix List takes ~50 ms to load: not on the loop, where scope checks
    # (registrable_domain) would first load it
    await asyncio.to_thread(registrable_domain, "example.com")
    remote = is_remote(config.archive)
    warc_root = Path(config.archive.removeprefix("file://")) if config.archive and not remote \
        else data / "warc"
    if not remote:
        warc_root.mkdir(parents=True, exist_ok=True)
        for report in recover_warc_dir(str(warc_root)):
            log_event(log, logging.WARNING, "warc_repaired",
                      "repaired WARC file after an unclean stop: %s", report)
    try:
        overrides = load_hosts_file(str(config.resolve)) if config.resolve else None
    except ConfigError as exc:  # the message names the file and line; add the flag
        raise ConfigError(f"--resolve {exc}") from None
    ports = {int(p) for p in config.allowed_ports} or None
    guard = AddressGuard(allow=config.allow_network, allowed_ports=ports)
    clock = clock if clock is not None else RealClock()
    resolver = Resolver(guard, overrides=overrides, clock=clock)
    # --ip-delay is charged when a request is granted; the pacer keeps it once more when
    # the request is written, after the store round trips and connection set-up between
    pacer = AddressPacer(clock, config.ip_delay) if config.ip_delay > 0 else None
    transport = AiohttpTransport(resolver, limit_per_host=config.max_in_flight_per_host,
                                 ca_file=config.ca_file, write_pacer=pacer)
    try:
        # a worker stopped mid-transaction must not hold the others' leases hostage: the
        # server ends its transaction well within a lease (store/postgres/store.py)
        store = await open_store(store_url(config.store), data, clock,
                                 durability=config.durability,
                                 stalled_transaction_timeout=min(
                                     STALLED_TRANSACTION_TIMEOUT, config.lease_ttl / 3))
    except BaseException:
        await transport.close()
        raise
    if is_shared(store_url(config.store)) and not config.join:
        try:
            await refuse_accidental_join(store, {worker_id_of(config)}, config.lease_ttl)
        except BaseException:
            await store.close()
            await transport.close()
            raise
    remember_roots(data, [config.archive if remote and config.archive else str(warc_root)])
    archive = open_archive(config, store) if remote else WarcWriter(
        str(warc_root), max_file_bytes=config.warc_max_bytes, software=config.user_agent)
    ticks: asyncio.Task[None] | None = None
    pruning: asyncio.Task[None] | None = None
    try:
        if isinstance(archive, SpooledArchive):
            figures = await archive.start()
            if figures["lost"]:
                log_event(log, logging.ERROR, "archive_segments_lost",
                          "archive: %(lost)d lost segments, %(requeued)d URLs queued again",
                          figures, reason="segment lost before its upload")
            ticks = asyncio.create_task(archive.run_ticks())
        tracker = ShardedTemplateTracker(trap_rules_from(config.traps), clock)
        intake = Intake(Scope(config, []), traps=tracker, known=known_urls_for(config))
        rows, problems = collect_seeds(config, intake, clock.now())
        for problem in problems:
            if report_problem is not None:
                report_problem(problem)
        metrics = CrawlMetrics()
        metrics.bind_tracking(intake.tracking)
        coordinator = None
        worker_store = store
        if is_shared(store_url(config.store)):  # many workers may share this crawl
            worker_store = with_call_timeout(store)  # a hung call is retried, not waited on
            coordinator = ShardCoordinator(
                worker_store, worker_id_of(config), clock,
                LeaseSettings(config.lease_ttl, config.worker_weight),
                expect_workers=config.expect_workers, start_gate=start_gate,
                info={"host": socket.gethostname(), "pid": os.getpid(),
                      "api": config.api or "", "data": str(config.data)})
        retention = OutboxRetention(
            worker_store, clock, config.events_retention, config.audit_retention,
            on_duty=lambda: coordinator is None or RETENTION_SHARD in coordinator.held)
        if retention.enabled:
            pruning = asyncio.create_task(retention.run())
        worker = Worker(config, worker_store, transport, archive, clock, intake,
                        on_progress=progress,
                        resolve_ip=host_ip_lookup(resolver), metrics=metrics,
                        coordinator=coordinator, end=CrawlEnd(end_gate))
        transport.send_gate = worker.may_start  # the last check before a request is written
        transport.on_tls_handshake = HandshakeCounter(worker.frontier, metrics)
        lag_monitor = LoopLagMonitor(metrics, idle=worker.pacer.idle)
        if isinstance(archive, SpooledArchive):
            worker.metrics.warc_upload_backlog.set_function(lambda: archive.backlog)
        if rows:
            await worker.add_seeds(rows)
        await _restore_scope(store, intake)
        loop = asyncio.get_running_loop()
        interrupts = 0

        def on_signal(sig: int) -> None:
            nonlocal interrupts
            interrupts += 1
            if interrupts == 1:
                reason = STOP_REASONS.get(sig, "stopped")
                again = "Ctrl-C again" if sig == signal.SIGINT else "a second signal"
                log_event(notice, logging.INFO, "stopping",
                          "stopping (%s): finishing in-flight fetches (%s to exit now)",
                          signal.Signals(sig).name, again, reason=reason)
                worker.request_stop(reason)
            else:
                worker.abort()

        previous_handlers = {sig: signal.getsignal(sig) for sig in STOP_REASONS}
        if install_signals:
            for sig in STOP_REASONS:
                loop.add_signal_handler(sig, on_signal, sig)
            loop.add_signal_handler(signal.SIGUSR1, log_tasks)  # where each task awaits
        runner = None
        if config.api is not None:  # aiohttp's server side and the API: only when asked
            from courtier.api.server import make_app, start_api
            from courtier.api.worker_control import WorkerControl

            api_host, api_port = api_address(config.api)
            app = make_app(WorkerControl(worker), worker.metrics.render, config.api_token,
                           config.api_allowed_hosts)
            runner, port = await start_api(app, api_host, api_port)
            log_event(notice, logging.INFO, "api_listening",
                      "admin API and dashboard on http://%s:%d/",
                      api_host, port, url=f"http://{api_host}:{port}/")
            if announce is not None:
                announce(f"http://{api_host}:{port}/")
        lag_monitor.start()
        stopper = None if stop is None else asyncio.create_task(_stop_when_set(stop, worker))
        try:
            status = await worker.run()
        finally:
            if stopper is not None:
                stopper.cancel()
            await lag_monitor.stop()
            status = worker.status
            status.longest_stall = lag_monitor.longest
            if runner is not None:
                await runner.cleanup()
            if install_signals:
                for sig, handler in previous_handlers.items():
                    loop.remove_signal_handler(sig)
                    if handler is not None:  # what the process had before (a child's)
                        signal.signal(sig, handler)
        if not remote:
            status.warc_files = sorted(str(p) for p in warc_root.rglob("*.warc.gz"))
        return status
    finally:
        for task in (ticks, pruning):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        archive.close()
        if isinstance(archive, SpooledArchive):
            await archive.drain()
        await transport.close()
        await store.close()
        if install_signals:  # kept to the end: a stop that hangs can still be asked where
            asyncio.get_running_loop().remove_signal_handler(signal.SIGUSR1)


async def _stop_when_set(stop: asyncio.Event, worker: Worker) -> None:
    await stop.wait()
    worker.request_stop("stopped")


async def refuse_accidental_join(store: Store, mine: set[str], lease_ttl: float) -> None:
    """Raise ConfigError naming the live workers of ``store`` other than ``mine``, if any.

    A one-off ``courtier crawl`` on a shared store with live workers would silently join
    their cluster: the shards would be split again (and moved back when it ends) for a
    crawl that meant to run alone. ``--join`` (``config.join``) and ``courtier worker``
    skip this check."""
    view = await store.cluster_view()
    others = live_others(view.worker_views(), view.lease_views(), mine, view.now, lease_ttl)
    if not others:
        return
    info = {w.worker_id: w.info for w in view.workers}

    def named(worker_id: str) -> str:
        where = info.get(worker_id) or {}
        host, pid = where.get("host"), where.get("pid")
        return f"{worker_id} (host {host}, pid {pid})" if host else worker_id

    raise ConfigError(
        f"--store has {len(others)} live worker(s): {', '.join(named(w) for w in others)}; "
        "this crawl would join their cluster and move shards: add --join to join it "
        "(or run `courtier worker`), or give another --store")


def worker_id_of(config: CrawlConfig) -> str:
    """``--worker-id``, else the id kept in ``DATA/worker-id`` (made once: host name and a
    random suffix). The data-dir lock makes it one live process per id, so a restarted
    worker may take its own leases back at once without waiting for them to expire."""
    if config.worker_id:
        return config.worker_id
    path = config.data / "worker-id"
    with contextlib.suppress(OSError):
        text = path.read_text(encoding="utf-8").strip()
        if text:
            return text
    name = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())[:60] or "worker"
    made = f"{name}-{secrets.token_hex(3)}"
    path.write_text(made + "\n", encoding="utf-8")
    return made


def open_archive(config: CrawlConfig, store: Store) -> SpooledArchive:
    """The object-store archive of ``--archive URL``, spooled under ``DATA/spool``."""
    assert config.archive is not None
    owner = config.archive_prefix or socket.gethostname()
    options = storage_options(config.archive, config.archive_endpoint, config.archive_region)
    return SpooledArchive(config.archive, config.data / "spool", owner, store, options=options,
                          max_bytes=config.archive_segment_bytes,
                          max_age=config.archive_segment_age, software=config.user_agent)


def known_urls_for(config: CrawlConfig) -> KnownUrls | None:
    """The owner-local state a worker's intake decides links with: the exact known URL
    keys of the shards it holds (dedup/known_urls.py), None with ``--known-urls-cap 0``."""
    return KnownUrls(config.known_urls_cap) if config.known_urls_cap > 0 else None


def host_ip_lookup(resolver: Resolver) -> Callable[[str], Awaitable[str | None]]:
    """host_key → its first allowed address (None when it does not resolve or is blocked)."""

    async def lookup(host_key: str) -> str | None:
        scheme, _, authority = host_key.partition("://")
        host, port = authority, 443 if scheme == "https" else 80
        if authority.startswith("["):
            host, _, rest = authority[1:].partition("]")
            if rest.startswith(":"):
                port = int(rest[1:])
        elif ":" in authority:
            host, _, port_text = authority.rpartition(":")
            port = int(port_text)
        try:
            addresses = await resolver.resolve(host, port)
        except FetchError:
            return None
        return addresses[0] if addresses else None

    return lookup


async def _restore_scope(store: Store, intake: Intake) -> None:
    """On resume, seeds given in earlier runs still define the scope."""
    for url in await store.seed_urls():
        with contextlib.suppress(InvalidURL):
            intake.scope.add_seed(canonicalize(url))


#: the cyclic garbage collector's thresholds during a crawl. CPython's (700, 10, 10)
#: ran ~1,000 collections in a 6,000-page crawl, 5-7 % of its CPU, though a page's
#: objects (dicts, links, rows) are freed by reference counting and form no cycles.
GC_THRESHOLDS = (20_000, 20, 20)


@contextlib.contextmanager
def crawl_gc() -> Iterator[None]:
    """Fewer collections for the crawl, and none of them walking what start-up built
    (``gc.freeze``: modules, tables, the config); put back as it was afterwards."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


@functools.cache
def no_collection_at_exit() -> None:
    """Leave every object out of the interpreter's last cyclic collection, at its exit.

    A crawl process ends soon after its crawl, and CPython's finalization walks every
    object still alive in one last collection: the crawl's frontier, known-URL set,
    memos and tables. That walk was ~0.4 CPU-s at the end of a 2,336-page crawl (3 % of
    its CPU; bench/README.md, issue 35); :func:`gc.freeze` at exit (an ``atexit``
    handler, registered once) moves them out of its reach. Nothing depends on it: the
    crawl closes its archive, store and transport itself (:func:`crawl`), logging's own
    exit handler still flushes the logs, and objects the exit would free by reference
    counting still are; only objects kept alive by reference cycles are not finalized,
    which Python never promises at exit anyway."""
    atexit.register(gc.freeze)


def run(config: CrawlConfig, progress_mode: str = "auto",
        report_problem: Callable[[SeedProblem], None] | None = None, *,
        on_progress: Callable[[CrawlStatus], None] | None = None,
        stop: asyncio.Event | None = None,
        start_gate: StartGate | None = None,
        end_gate: EndGate | None = None) -> CrawlStatus:
    """Synchronous entry point used by the CLI. ``on_progress`` (a worker process of
    ``crawl --workers N``) takes the live figures instead of the progress display;
    ``stop``, ``start_gate`` and ``end_gate`` as in :func:`crawl`."""
    progress = Progress(progress_mode, progress_stream(config, progress_mode))
    no_collection_at_exit()
    with data_dir_lock(config.data), crawl_gc():
        try:
            return run_async(crawl(config, on_progress or progress, report_problem,
                                   stop=stop, start_gate=start_gate,
                                   end_gate=end_gate))
        finally:
            progress.close()


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on uvloop when it is installed, else on the default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    result: T = uvloop.run(coro)
    return result
