"""A real PostgreSQL restart in immediate mode mid-crawl, twice, on a server of the test's own.

The shared server on 127.0.0.1:5432 is never restarted (other suites use it at the
same time): the test starts a throwaway server (tests/pg_server.py) and two worker
processes on it. First ``pg_ctl restart -m immediate`` (the server is back in about
a second, after crash recovery); later an immediate stop that keeps the server down
until both workers have been refused a connection by it, then a start. Judged by
the test web's log (every URL fetched, politeness across both restarts), the
server's own log (two crash recoveries), the workers' metrics and logs (they
paused), their heartbeats and lease renewals after the start (they reconnected)
and the outbox read through a cursor across the restarts (one event per (URL,
version), one final event per URL, dense read positions).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from courtier.core.urls import SHARD_COUNT
from courtier.testweb.killloop import final_event_problems
from courtier.testweb.server import TestWebServer
from courtier.testweb.spec import default_web
from tests.integration.cluster.harness import (
    TTL,
    Cluster,
    OutboxReader,
    WorkerProcess,
    check_outbox,
    done,
    metric_of,
    stop,
    wait_for,
)
from tests.pg_server import RECOVERY_LINE, ThrowawayServer, throwaway_server

pytestmark = pytest.mark.timeout(600)

#: worker log lines of the crawl loop pausing on the store (each counts one
#: courtier_store_pauses): a failed turn, a commit retried
PAUSE_MARKS = ("store unavailable, pausing", "store write failed")
#: the cause a pause names when a new connection was refused (no server listening)
REFUSED_MARK = "Connection refused"


@dataclass
class Restartable:
    """The crawl's cluster on a server the test may restart."""

    cluster: Cluster
    server: ThrowawayServer


@pytest.fixture
async def restartable(tmp_path: Path) -> AsyncIterator[Restartable]:
    with throwaway_server() as server:
        dsn = await server.create_database("crawl")
        spec = default_web(n_hosts=12, pages_per_host=15, crawl_delay=0.3, latency=0.02)
        async with TestWebServer(spec) as web:
            cluster = Cluster(dsn, tmp_path, web, spec, delay=0.15)
            await cluster.open()
            try:
                yield Restartable(cluster, server)
            finally:
                await cluster.close()


async def test_immediate_restarts_pause_the_workers_who_reconnect_and_lose_nothing(
        restartable: Restartable) -> None:
    cluster, server = restartable.cluster, restartable.server
    expected = cluster.server.web.expected_fetches()
    began = time.monotonic()
    await cluster.start("w0", *cluster.server.web.seeds())
    await cluster.start("w1")
    await wait_for("two workers owning every shard", _both_own_shards(cluster))
    reader = OutboxReader(cluster)
    reading = asyncio.create_task(reader.run())
    try:
        # 1: pg_ctl restart -m immediate, a quarter of the way through the crawl
        await wait_for("a quarter of the crawl", _pages_at_least(cluster, len(expected) // 4))
        first_restart = time.monotonic()
        await server.arestart_immediate()
        await wait_for("pages fetched after the restart",
                       _pages_since(cluster, first_restart, 20))

        # 2: stop -m immediate, kept down until both workers paused on a refused
        # connection (they tried to reconnect to the stopped server), then start
        marks = {w.worker_id: _pause_lines(w, refused=True) for w in cluster.workers.values()}
        await wait_for("half of the crawl", _pages_at_least(cluster, len(expected) // 2))
        stopped = time.monotonic()
        await server.astop_immediate()
        await wait_for("both workers refused by the stopped server",
                       _each_refused_since(cluster, marks))
        down_for = time.monotonic() - stopped
        await server.astart()
        restarted_wall, restarted = time.time(), time.monotonic()

        await done(cluster, expected)
        view = await cluster.view()
        pauses = {w.worker_id: await metric_of(w, "courtier_store_pauses_total")
                  for w in cluster.workers.values()}
        await stop(cluster)
    finally:
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading
    await reader.read_once()  # whatever was committed after the last poll
    print(f"store restart: crawl of {len(expected)} URLs with two immediate restarts took "
          f"{time.monotonic() - began:.1f} s (restart at {first_restart - began:.1f} s, "
          f"stop at {stopped - began:.1f} s, start at {restarted - began:.1f} s); server "
          f"down {down_for:.1f} s the second time; store pauses {pauses}; "
          f"{reader.failed_reads} failed outbox reads")

    # the server really crashed and recovered twice (immediate mode: no shutdown checkpoint)
    assert server.log_text().count(RECOVERY_LINE) == 2, server.log_text()[-3000:]
    # both workers paused on the stopped server, then reconnected: each one heartbeat
    # and renewed its leases after the start (store rows, server clock), and every page
    # first fetched after the start was committed (it has its event)
    assert all(n >= 1 for n in pauses.values()), pauses
    assert {w: p.proc.returncode for w, p in cluster.workers.items()} == {"w0": 0, "w1": 0}
    beats = {w.worker_id: w.heartbeat_at for w in view.workers}
    assert all(beats[w] > restarted_wall for w in ("w0", "w1")), (beats, restarted_wall)
    renewed = {lease.owner for lease in view.leases
               if lease.expires_at > restarted_wall + TTL}
    assert renewed == {"w0", "w1"}, renewed
    late = _first_fetched_since(cluster, restarted)
    assert late, "nothing was left to fetch after the start"
    assert late <= {e.payload["url"] for e in reader.events}

    # nothing lost, nothing emitted twice, politeness held across both restarts
    assert expected - cluster.fetched() == set()
    await check_outbox(cluster, expected)
    stored = await cluster.events()
    assert [e.id for e in reader.events] == list(range(1, len(reader.events) + 1))
    assert [(e.id, e.url_key, e.version) for e in reader.events] == [
        (e.id, e.url_key, e.version) for e in stored]
    assert final_event_problems(reader.events, expected) == ([], [], [])
    assert cluster.violations() == []


# ---- conditions ------------------------------------------------------------------------


def _both_own_shards(cluster: Cluster) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        owners = await cluster.owners()
        return len(owners) == SHARD_COUNT and set(owners.values()) == {"w0", "w1"}
    return check


def _pages_at_least(cluster: Cluster, n: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return len(cluster.page_log()) >= n
    return check


def _pages_since(cluster: Cluster, since: float, n: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return sum(1 for r in cluster.page_log() if r.start > since) >= n
    return check


def _pause_lines(worker: WorkerProcess, refused: bool = False) -> int:
    """How many pause lines ``worker`` logged (only those naming a refused connection)."""
    lines = worker.stderr.read_text(errors="replace").splitlines()
    return sum(1 for line in lines if any(mark in line for mark in PAUSE_MARKS)
               and (not refused or REFUSED_MARK in line))


def _each_refused_since(cluster: Cluster, marks: dict[str, int]
                        ) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return all(_pause_lines(w, refused=True) > marks[w.worker_id]
                   for w in cluster.workers.values())
    return check


def _first_fetched_since(cluster: Cluster, since: float) -> set[str]:
    """Pages fetched after ``since`` that nobody had fetched before."""
    before = {cluster.server.url(r.host, r.path_qs) for r in cluster.page_log()
              if r.start <= since}
    return {cluster.server.url(r.host, r.path_qs) for r in cluster.page_log()
            if r.start > since} - before
