"""Real ``courtier worker`` processes on one PostgreSQL database and the local test web.

The test web's request log is the independent observer: each worker puts its id
in its User-Agent comment (``courtier/1.0 (test worker w1)``; the product token
``courtier`` is what robots.txt matches), so the log says who sent what. Store
rows (``cluster_view``, the outbox) are read through a store of the test's own.

Every wait is on an observable condition with a generous deadline; nothing is
ordered by sleeping.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import re
import signal
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import asyncpg

from courtier.cluster.rendezvous import target_owners
from courtier.core.clock import RealClock
from courtier.core.errors import StoreError
from courtier.core.urls import SHARD_COUNT
from courtier.store.base import Event, Store
from courtier.store.cluster import ClusterView
from courtier.store.open import make_store
from courtier.testweb.killloop import final_event_problems
from courtier.testweb.server import RequestRecord, TestWebServer, politeness_violations
from courtier.testweb.spec import WebSpec
from tests.pg import ADMIN_DSN

TTL = 3.0          # --lease-ttl of every test worker on plain PostgreSQL
#: --lease-ttl of the test workers on Citus: a lease round there writes the ``shards``
#: reference table on every node by two-phase commit under one lock; before migration
#: 0031 such rounds took 2-7 s at load 15-17, past the 2.25 s a 3 s lease leaves, and the
#: workers fenced and took each other's shards over; since, at most 1.8 s in four runs at
#: load 10-14, too few to call 3 s safe here (docs/scale-out.md, "Lease rounds on Citus");
#: with the renewal in the heartbeat (migration 0039) 19 of 21 passed at 3 s in seven runs
#: at load 11-21, and the workers still fenced (up to 39 times a run): kept at 10
CITUS_TTL = 10.0
DEADLINE = 180.0   # seconds any single wait may take before the test fails
#: --lease-ttl of ``crawl --workers N`` in the start- and end-gate tests, which count shard
#: moves exactly (0 handovers; takeovers = the shards of the child killed): a stall of the
#: machine longer than a TTL lets live workers' leases lapse (seen once at 3 s on a slower
#: machine: a 4.88 s round, 518 shards of the two live workers taken over), and nothing
#: they test depends on the TTL; only the kill test waits for one to pass
GATE_TTL = 10.0


def agent_of(worker_id: str) -> str:
    return f"courtier/1.0 (test worker {worker_id})"


async def wait_for(what: str, check: Callable[[], Awaitable[bool]],
                   deadline: float = DEADLINE, every: float = 0.1) -> None:
    """Poll ``check`` until it is true; fail naming ``what`` after ``deadline`` seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while True:
        try:
            if await check():
                return
        except StoreError:  # the observer's own connection was cut too: ask again
            pass
        if loop.time() > end:
            raise AssertionError(f"gave up waiting for {what} after {deadline:.0f} s")
        await asyncio.sleep(every)


async def start_local_crawl(dsn: str, data: Path, server: TestWebServer, hosts: Path,
                            log: Path, workers: int) -> asyncio.subprocess.Process:
    """``courtier crawl --workers N`` on the test web, its JSON log (``-v``: the
    coordinators' lines) appended to ``log``; in a session of its own (the start- and
    end-gate tests), at a lease TTL of :data:`GATE_TTL`."""
    with log.open("ab") as handle:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "courtier", "crawl", "--workers", str(workers),
            "--store", dsn, "--data", str(data), "--resolve", str(hosts),
            "--allow-network", "127.0.0.0/8", "--delay", "0.15", "--lease-ttl", str(GATE_TTL),
            "--concurrency", "8", "--linger", "0", "--progress", "none",
            "--log-format", "json", "-v", *server.web.seeds(),
            stdout=asyncio.subprocess.DEVNULL, stderr=handle,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)


@dataclass
class WorkerProcess:
    worker_id: str
    proc: asyncio.subprocess.Process
    stderr: Path

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None


@dataclass
class Cluster:
    """A test web, a database and the worker processes crawling it."""

    dsn: str
    root: Path
    server: TestWebServer
    spec: WebSpec
    delay: float
    extra: list[str] = field(default_factory=list)
    #: the workers' --lease-ttl (and worker TTL): :data:`TTL`, or :data:`CITUS_TTL`
    lease_ttl: float = TTL
    workers: dict[str, WorkerProcess] = field(default_factory=dict)
    store: Store | None = None

    async def open(self) -> Store:
        self.store = make_store(self.dsn, self.root / "observer", RealClock())
        await self.store.open()
        rows_file = self.root / "hosts.txt"
        rows_file.write_text(self.server.web.hosts_file_text())
        return self.store

    async def close(self) -> None:
        for worker in self.workers.values():
            if worker.alive:
                with contextlib.suppress(ProcessLookupError):
                    worker.proc.send_signal(signal.SIGCONT)
                    worker.proc.kill()
                await worker.proc.wait()
        if self.store is not None:
            await self.store.close()

    def args(self, worker_id: str) -> list[str]:
        return [
            "worker", "--store", self.dsn, "--data", str(self.root / worker_id),
            "--api", "127.0.0.1:0", "--worker-id", worker_id,
            "--user-agent", agent_of(worker_id),
            "--resolve", str(self.root / "hosts.txt"), "--allow-network", "127.0.0.0/8",
            "--delay", str(self.delay), "--lease-ttl", str(self.lease_ttl), "--progress", "none",
            "--concurrency", "8", "--linger", "0", *self.extra,
        ]

    async def start(self, worker_id: str, *seeds: str) -> WorkerProcess:
        stderr = self.root / f"{worker_id}.log"
        handle = stderr.open("ab")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "courtier", *self.args(worker_id), *seeds,
            stdout=asyncio.subprocess.DEVNULL, stderr=handle,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        handle.close()
        worker = WorkerProcess(worker_id, proc, stderr)
        self.workers[worker_id] = worker
        return worker

    async def stop_all(self) -> dict[str, int | None]:
        """SIGTERM every live worker (graceful: drain, commit, release, leave)."""
        for worker in self.workers.values():
            if worker.alive:
                worker.proc.send_signal(signal.SIGTERM)
        codes = {}
        for worker in self.workers.values():
            try:
                codes[worker.worker_id] = await asyncio.wait_for(worker.proc.wait(), DEADLINE)
            except TimeoutError:
                tail = await _task_list_and_tail(worker)
                raise AssertionError(
                    f"{worker.worker_id} still running {DEADLINE:.0f} s after SIGTERM; the end"
                    " of its log, with the task list it logged on SIGUSR1:\n" + tail) from None
        return codes

    # ---- what the store says -----------------------------------------------------------

    async def view(self) -> ClusterView:
        assert self.store is not None
        return await self.store.cluster_view()

    async def owners(self) -> dict[int, str]:
        """Shard → owner of every unexpired lease."""
        view = await self.view()
        return {lease.shard: lease.owner for lease in view.leases
                if lease.owner is not None and lease.expires_at > view.now}

    async def events(self) -> list[Event]:
        assert self.store is not None
        return await self.store.read_events(0, 1_000_000)

    async def diagnosis(self, expected: set[str]) -> str:
        """What a failed wait should say: store counts, owners, last requests, missing."""
        assert self.store is not None
        missing = sorted(expected - self.fetched())
        last = {}
        for r in self.log():
            last[r.user_agent] = round(r.start - time.monotonic(), 1)
        rows = []
        for url in missing[:5]:
            with contextlib.suppress(Exception):
                from courtier.core.urls import canonicalize
                rows.append(await self.store.get_url(canonicalize(url).url_key))
        owners = collections.Counter((await self.owners()).values())
        from courtier.core.urls import canonicalize as _canon
        for host in sorted({_canon(u).host_key for u in missing})[:2]:
            index = await self.store.get_url(_canon(host + "/").url_key)
            if index:
                index = {k: index[k] for k in ("state", "version", "outcome", "status",
                                               "last_fetch_at", "shard")}
            hits = [(r.user_agent[-3:-1], round(r.start, 2), r.status) for r in self.log()
                    if host.endswith(r.host + ":" + str(self.server.port))
                    and r.path_qs in ("/", "/robots.txt")]
            rows.append({"index": index, "hits": hits,
                         "log": await self.store.fetch_log(url_key=_canon(host + "/").url_key)
                         if hasattr(self.store, "fetch_log") else None})
        return (f"counts {await self.store.counts()}, owners {dict(owners)}, "
                f"last request (s ago) {last}, alive "
                f"{ {w: p.alive for w, p in self.workers.items()} }, "
                f"{len(missing)} missing, e.g. {missing[:8]} {rows}")

    # ---- what the server saw -----------------------------------------------------------

    def log(self) -> list[RequestRecord]:
        return list(self.server.log)

    def page_log(self) -> list[RequestRecord]:
        return [r for r in self.server.log if not r.path_qs.startswith("/robots")]

    def fetched(self) -> set[str]:
        return {self.server.url(r.host, r.path_qs) for r in self.page_log()}

    def page_counts(self) -> collections.Counter[str]:
        return collections.Counter(self.server.url(r.host, r.path_qs) for r in self.page_log())

    def violations(self) -> list[str]:
        host_delays = {h.name: max(self.delay, h.crawl_delay)
                       for h in self.spec.of_kind("crawl_delay")}
        return politeness_violations(self.log(), delay=self.delay, max_in_flight=1,
                                     host_delays=host_delays)

    def requests_by(self, worker_id: str) -> list[RequestRecord]:
        agent = agent_of(worker_id)
        return [r for r in self.server.log if r.user_agent == agent]


@contextlib.asynccontextmanager
async def serving(dsn: str, root: Path, spec: WebSpec, delay: float = 0.15,
                  extra: list[str] | None = None, ssl_context: ssl.SSLContext | None = None,
                  plain_http: bool = False, lease_ttl: float = TTL
                  ) -> AsyncIterator[Cluster]:
    """The test web of ``spec`` and an opened :class:`Cluster` on it (closed after); with
    ``ssl_context`` served over HTTPS (and ``plain_http``: over plain HTTP on a second
    port too, see :class:`TestWebServer`)."""
    async with TestWebServer(spec, ssl_context=ssl_context, plain_http=plain_http) as server:
        cluster = Cluster(dsn, root, server, spec, delay=delay, extra=list(extra or []),
                          lease_ttl=lease_ttl)
        await cluster.open()
        try:
            yield cluster
        finally:
            await cluster.close()


@dataclass
class OutboxReader:
    """A consumer of the outbox: reads after its cursor while the crawl runs (each read
    also sequences the events committed since, so the crawl's events are numbered while
    the store changes under it). ``failures``: what each failed read said."""

    cluster: Cluster
    events: list[Event] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def failed_reads(self) -> int:
        return len(self.failures)

    async def read_once(self) -> None:
        assert self.cluster.store is not None
        after = self.events[-1].id if self.events else 0
        try:
            self.events.extend(await self.cluster.store.read_events(after, 1000))
        except StoreError as exc:
            self.failures.append(f"{exc} (cause: {exc.__cause__!r})")

    async def run(self) -> None:
        while True:
            await self.read_once()
            await asyncio.sleep(0.2)


def has_fetched(cluster: Cluster, worker_id: str, n: int) -> Callable[[], Awaitable[bool]]:
    """Whether the test web has seen at least ``n`` requests of ``worker_id``."""
    async def check() -> bool:
        return len(cluster.requests_by(worker_id)) >= n
    return check


def all_fetched(cluster: Cluster, expected: set[str]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return expected <= cluster.fetched()
    return check


#: the lines a worker logs when results of its fetches are lost: its self-fence
#: (cluster/coordinator.py) and shards lost to another worker (crawl/shard_keeper.py)
LOST_RESULT_LINES = ("could not renew shard leases in time", "lost the lease of",
                     "handover drain timed out")


def stall_lines(worker: WorkerProcess) -> list[str]:
    """The worker's ``event_loop_stalled`` lines (its loop a second or more late, with the
    CPU it used meanwhile): printed by the long tests, so a lease that lapsed under a live
    worker can be told from a crawler fault."""
    return [line for line in worker.stderr.read_text(errors="replace").splitlines()
            if "the event loop ran" in line]


def lost_result_times(worker: WorkerProcess) -> list[float]:
    """When ``worker`` logged a fence, a lost shard or a drain's cut requests
    (time.monotonic of this machine, from the log lines' local time stamps: millisecond
    resolution)."""
    wall = time.time() - time.monotonic()
    times = []
    for line in worker.stderr.read_text(errors="replace").splitlines():
        if any(text in line for text in LOST_RESULT_LINES):
            stamp, millis = line[:23].split(",")
            at = time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000
            times.append(at - wall)
    return times


async def metric_of(worker: WorkerProcess, name: str) -> float:
    """A sample of the worker's /metrics (its API address is in its log)."""
    match = None
    for line in worker.stderr.read_text(errors="replace").splitlines():
        found = re.search(r"admin API and dashboard on (http://[0-9.:]+/)", line)
        if found:
            match = found.group(1)
    assert match is not None, f"{worker.worker_id} announced no API"
    async with aiohttp.ClientSession() as session, \
            session.get(match + "metrics", timeout=aiohttp.ClientTimeout(total=30)) as resp:
        text = await resp.text()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def cut_connections(dsn: str) -> int:
    """Terminate every backend connected to the test database (not the shared server:
    other tests use it). Returns how many were cut."""
    database = dsn.rsplit("/", 1)[1]
    conn = await asyncpg.connect(ADMIN_DSN, timeout=10)
    try:
        rows = await conn.fetch(
            "SELECT pg_terminate_backend(pid) AS cut FROM pg_stat_activity"
            " WHERE datname = $1 AND pid <> pg_backend_pid()", database)
    finally:
        await conn.close()
    return sum(1 for row in rows if row["cut"])


async def connections_since(dsn: str, wall_time: float) -> int:
    """How many backends of the test database connected after ``wall_time`` (POSIX
    seconds): the reconnections that followed a cut."""
    database = dsn.rsplit("/", 1)[1]
    conn = await asyncpg.connect(ADMIN_DSN, timeout=10)
    try:
        count = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1"
            " AND pid <> pg_backend_pid() AND backend_start > to_timestamp($2)",
            database, wall_time)
    finally:
        await conn.close()
    return int(count)


def monotonic_of(store_time: float) -> float:
    """A store-clock time (PostgreSQL's clock on this machine: POSIX seconds) on the test
    server's clock (time.monotonic)."""
    return store_time - (time.time() - time.monotonic())


def newcomer_taking(shards: set[int], members: tuple[str, ...]) -> str:
    """The first of w{n}, w{n+1}, … (n = len(members)) whose join moves at least one of
    ``shards`` to it (which shards a host is in depends on the server's port)."""
    for n in range(len(members), len(members) + 100):
        newcomer = f"w{n}"
        targets = target_owners(sorted(shards), dict.fromkeys((*members, newcomer), 1.0))
        if newcomer in targets.values():
            return newcomer
    raise AssertionError("no newcomer id takes one of the shards")  # (1 - 1/N) ** 100


def ids_each_owning(hosts: dict[str, int], count: int = 3,
                    at_least: int = 2) -> tuple[str, ...]:
    """The first ``count`` ids in a row, w{k}, w{k+1}, …, each of which owns at least
    ``at_least`` of ``hosts`` (host → shard) among their rendezvous targets. Which shard a
    host is in depends on the server's port: of the 10 hosts of the cluster web with pages,
    one of w0, w1, w2 owns none for about 1 port in 20."""
    for first in range(0, 100 * count, count):
        ids = tuple(f"w{first + i}" for i in range(count))
        targets = target_owners(sorted(set(hosts.values())), dict.fromkeys(ids, 1.0))
        owned = collections.Counter(targets[shard] for shard in hosts.values())
        if all(owned[i] >= at_least for i in ids):
            return ids
    raise AssertionError(f"no {count} ids each owning {at_least} of {sorted(hosts)}")


async def owning_targets(cluster: Cluster, ids: tuple[str, ...]) -> bool:
    """Whether every shard is owned by its rendezvous target among ``ids``."""
    return await cluster.owners() == target_owners(range(SHARD_COUNT), dict.fromkeys(ids, 1.0))


async def start_three(cluster: Cluster, ids: tuple[str, str, str] = ("w0", "w1", "w2")) -> None:
    await cluster.start(ids[0], *cluster.server.web.seeds())
    await cluster.start(ids[1])
    await cluster.start(ids[2])

    async def all_own_shards() -> bool:
        owners = await cluster.owners()
        return len(owners) == SHARD_COUNT and set(owners.values()) == set(ids)

    await wait_for("three workers owning every shard", all_own_shards)


async def finish(cluster: Cluster, expected: set[str]) -> None:
    await done(cluster, expected)
    await stop(cluster)


async def done(cluster: Cluster, expected: set[str]) -> None:
    """Wait until every expected URL was fetched and has its final event."""
    try:
        await wait_for("every expected URL fetched", all_fetched(cluster, expected))
    except AssertionError as exc:
        raise AssertionError(f"{exc}; {await cluster.diagnosis(expected)}") from None

    async def finals() -> bool:
        without, _, _ = final_event_problems(await cluster.events(), expected)
        return not without

    await wait_for("a final event for every expected URL", finals)


async def stop(cluster: Cluster) -> None:
    """SIGTERM every live worker; each must exit 0."""
    codes = await cluster.stop_all()
    assert {w: c for w, c in codes.items() if c not in (0, -signal.SIGKILL)} == {}


async def check_outbox(cluster: Cluster, expected: set[str]) -> None:
    events = await cluster.events()
    keys = [(e.url_key, e.version) for e in events]
    assert len(keys) == len(set(keys)), "an outbox event was emitted twice"
    without, several, after = final_event_problems(events, expected)
    assert (without, several, after) == ([], [], []), (
        f"without a final event {without[:10]}, several {several[:10]}, after the final"
        f" {after[:10]}")



async def _task_list_and_tail(worker: WorkerProcess) -> str:
    """The end of a hung worker's log, after it was asked (SIGUSR1) to log every task of its
    event loop with the await each one is parked on (courtier/loopwatch.py)."""
    with contextlib.suppress(ProcessLookupError):
        worker.proc.send_signal(signal.SIGUSR1)

    async def logged() -> bool:
        return "tasks of the event loop" in worker.stderr.read_text(errors="replace")

    with contextlib.suppress(AssertionError):
        await wait_for("the task list in the log", logged, deadline=10.0)
    lines = worker.stderr.read_text(errors="replace").splitlines()
    return "\n".join(lines[-80:])
