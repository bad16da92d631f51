"""``courtier crawl --workers 3`` starts with the shards already spread: no handover.

Real processes from the command line on a PostgreSQL database of their own. Judged from
the store's lease table, read by the test's own store at the moment all three workers
hold leases: every shard was granted exactly once — its epoch is still 1 (a release,
which every graceful handover ends with, bumps it; a takeover bumps it), the store's
handover counters are 0 — and each shard's owner is its rendezvous target among the
three workers (the placement is the usual one). The bound is exact: 0 handovers. The
launcher's start gate (cluster/start_gate.py) lets no worker take a shard before every
worker has registered, so each worker's first plan counts all three; the only way left
to a handover is a registered worker whose heartbeat goes stale in that moment (no
heartbeat for a whole lease TTL, 10 s here — ``harness.GATE_TTL`` — while the others
heartbeat every 0.2 s).

Seen red on a scratch copy (restored since), each run against the tests as they are:

* no gate and no quorum (``start_gate=None`` in ``crawl/app.py``; the children keep
  ``expect_workers=1``: the first worker takes every shard and hands most over): both
  lease tests fail, "epochs {1: 688, 2: 336}, handovers {'graceful': 336, ...}" and
  891 shards handed over with the third worker held;
* the main branch's start-up (no gate; the children wait for 3 live workers for at most
  one lease TTL), by ``PYTHONPATH`` to its source: the held-worker test fails — the two
  others took every shard after 3 s, fetched, and handed 344 over when the third came —
  while the plain test passes on this machine (the children registered within 0.05-2 s
  of each other, inside the 3 s TTL);
* the parent never noticing a child that ended (``gate.ended`` not called): the test of
  the child that cannot start fails at its deadline (the two others waited for ever).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import json
import os
import signal
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from courtier.cluster.rendezvous import target_owners
from courtier.core.clock import RealClock
from courtier.core.urls import SHARD_COUNT
from courtier.store.base import Store
from courtier.store.open import make_store
from courtier.testweb.server import TestWebServer
from courtier.testweb.spec import default_web
from tests.integration.cluster.harness import DEADLINE, start_local_crawl, wait_for

pytestmark = pytest.mark.timeout(300)

#: far more pages than the test waits for: the crawl is stopped once the leases are read
WEB = {"n_hosts": 6, "pages_per_host": 80, "crawl_delay": 0.3, "latency": 0.02}
WORKERS = 3


async def _stop(proc: asyncio.subprocess.Process) -> int | None:
    """SIGTERM (a graceful stop), then the hang guards: a second SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGTERM, signal.SIGKILL):
        if proc.returncode is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 120)
    return proc.returncode


def _events(log: Path, event: str) -> list[dict[str, object]]:
    lines = []
    for line in log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("event") == event:
                lines.append(entry)
    return lines


def _all_three_hold_leases(store: Store) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        view = await store.cluster_view()
        live = [lease for lease in view.leases
                if lease.owner is not None and lease.expires_at > view.now]
        return len(live) == SHARD_COUNT and len({lease.owner for lease in live}) == WORKERS
    return check


async def _assert_each_shard_granted_once(store: Store, worker_ids: list[str]) -> None:
    view = await store.cluster_view()
    epochs: dict[int, int] = {}
    for lease in view.leases:
        epochs[lease.epoch] = epochs.get(lease.epoch, 0) + 1
    handovers = {k: v for k, v in view.handovers.items() if v}
    assert (epochs, handovers) == ({1: SHARD_COUNT}, {}), (
        f"epochs {epochs}, handovers {view.handovers}: a shard changed hands at the start")
    owners = {lease.shard: lease.owner for lease in view.leases}
    targets = target_owners(range(SHARD_COUNT), dict.fromkeys(worker_ids, 1.0))
    assert owners == targets, "a shard is not with its rendezvous target"


def _worker_ids(data: Path, known: dict[int, str] | None = None) -> list[str]:
    """The children's ids: from their ``worker-id`` files, or ``known`` (index → id)."""
    known = known or {}
    return [known.get(i) or (data / f"worker-{i}" / "worker-id").read_text().strip()
            for i in range(WORKERS)]


async def test_crawl_with_three_workers_starts_without_a_handover(
        dsn: str, tmp_path: Path) -> None:
    async with TestWebServer(default_web(**WEB)) as server:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text(server.web.hosts_file_text())
        data, log = tmp_path / "crawl", tmp_path / "crawl.log"
        store = make_store(dsn, tmp_path / "observer", RealClock())
        await store.open()
        proc = await start_local_crawl(dsn, data, server, hosts, log, WORKERS)
        try:
            await wait_for("three workers holding every shard",
                           _all_three_hold_leases(store))
            await _assert_each_shard_granted_once(store, _worker_ids(data))
            assert _events(log, "handover") == []
        finally:
            code = await _stop(proc)
            await store.close()
    assert code == 0, log.read_text(errors="replace")[-3000:]


async def test_a_worker_slow_to_start_is_waited_for_however_long_it_takes(
        dsn: str, tmp_path: Path) -> None:
    """The third worker's start is held (its ``worker-id`` file is a FIFO, which the test
    answers once for the parent's check, then a second time for the worker itself) until
    the two others are either waiting for it or crawling without it. Nothing is fetched
    before it comes, however long that is — no lease TTL ends the wait — and then every
    shard is granted once."""
    async with TestWebServer(default_web(**WEB)) as server:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text(server.web.hosts_file_text())
        data, log = tmp_path / "crawl", tmp_path / "crawl.log"
        fifo = data / "worker-2" / "worker-id"
        fifo.parent.mkdir(parents=True)
        os.mkfifo(fifo)
        release = threading.Event()
        feeder = threading.Thread(target=_answer_twice, args=(fifo, "held-2", release),
                                  daemon=True)
        feeder.start()
        store = make_store(dsn, tmp_path / "observer", RealClock())
        await store.open()
        proc = await start_local_crawl(dsn, data, server, hosts, log, WORKERS)
        try:
            async def others_waiting_or_crawling() -> bool:
                waiting = {e.get("worker") for e in _events(log, "awaiting_siblings")}
                return len(waiting) >= WORKERS - 1 or bool(server.log)

            await wait_for("the two other workers waiting or crawling",
                           others_waiting_or_crawling)
            requests_before = len(server.log)
            release.set()
            await wait_for("three workers holding every shard",
                           _all_three_hold_leases(store))
            await _assert_each_shard_granted_once(store, _worker_ids(data, {2: "held-2"}))
            assert _events(log, "handover") == []
            assert requests_before == 0, "the others crawled before the third registered"
        finally:
            _unblock(fifo, release, feeder)
            code = await _stop(proc)
            await store.close()
    assert code == 0, log.read_text(errors="replace")[-3000:]


async def test_a_worker_that_ends_before_registering_is_not_waited_for(
        dsn: str, tmp_path: Path) -> None:
    """The third worker cannot start (its ``DATA/worker-2`` is locked, as by another
    courtier process): the parent stops awaiting it when it ends, and the two others crawl
    the whole web, each page once (the test web's log). Seen red with the parent never
    looking at which children ended (``gate.ended`` not called): the two waited for ever
    and the crawl did not end within the test's deadline."""
    spec = default_web(n_hosts=4, pages_per_host=6, crawl_delay=0.3, latency=0.02)
    async with TestWebServer(spec) as server:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text(server.web.hosts_file_text())
        data, log = tmp_path / "crawl", tmp_path / "crawl.log"
        (data / "worker-2").mkdir(parents=True)
        with (data / "worker-2" / "courtier.lock").open("a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            proc = await start_local_crawl(dsn, data, server, hosts, log, WORKERS)
            try:
                await asyncio.wait_for(proc.wait(), DEADLINE)  # a hang guard
            finally:
                code = await _stop(proc)
        expected = server.web.expected_fetches()
        pages = [r for r in server.log if not r.path_qs.startswith("/robots")]
    counts = collections.Counter(server.url(r.host, r.path_qs) for r in pages)
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    assert expected - set(counts) == set(), "expected pages not fetched"
    assert {u: n for u, n in counts.items() if n > 1} == {}, "a page was fetched twice"
    failed = _events(log, "worker_failed")
    assert len(failed) == 1 and "worker-2" in str(failed[0]["message"]), text[-3000:]


def _answer_twice(fifo: Path, worker_id: str, release: threading.Event) -> None:
    """Write ``worker_id`` to the FIFO for its first reader (the parent's check of the
    store's live workers), then, once ``release`` is set, for its second (the worker)."""
    for gate in (None, release):
        if gate is not None:
            gate.wait()
        with fifo.open("w") as handle:
            handle.write(worker_id + "\n")


def _unblock(fifo: Path, release: threading.Event, feeder: threading.Thread) -> None:
    """Let the feeder finish even if nobody reads any more (a failed test)."""
    release.set()
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader: its open() returns
    try:
        feeder.join(timeout=30)
    finally:
        os.close(reader)
