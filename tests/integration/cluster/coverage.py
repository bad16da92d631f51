"""Who owns the shards while faults come and go: a watch of the store's lease rows.

:class:`CoverageWatch` reads ``cluster_view`` every ``every`` seconds and records, for
each read, whether every shard was *covered*: held by an unexpired lease (store clock)
whose owner is *up* — a worker process alive and not stopped, as the caller says
(``up``, read before and after each read, so a worker killed during the read does not
count). A read that fails (the store down) counts as uncovered: nobody can be seen to
own anything. It also keeps the heartbeats of the up workers, which mark their
coordinators' rounds (each round heartbeats first).

From the reads: :func:`episodes` (runs of uncovered reads) and :func:`round_gaps` (the
time between two rounds of one worker, on the store clock).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from courtier.core.errors import StoreError
from courtier.core.urls import SHARD_COUNT
from tests.integration.cluster.harness import Cluster


@dataclass(frozen=True, slots=True)
class Read:
    """One read of the lease rows: ``before``/``after`` are the test's monotonic clock
    around it, ``covered`` None when the read failed."""

    before: float
    after: float
    covered: bool | None
    uncovered: int
    heartbeats: dict[str, float]

    @property
    def owned(self) -> bool:
        return self.covered is True


@dataclass(frozen=True, slots=True)
class Episode:
    """Uncovered reads in a row: the first one began at ``first`` and ended at
    ``first_end``; the last one began at ``last`` (the latest moment a shard was surely
    without an up owner); ``owned_by`` is the end of the first covered read after them
    (None: still uncovered at the end of the watch), so the shards were owned again
    between ``last`` and ``owned_by``."""

    first: float
    first_end: float
    last: float
    owned_by: float | None
    worst: int  # most shards uncovered in one read (SHARD_COUNT for a failed read)
    failed: int = 0  # reads that failed (the store could not be read)


@dataclass
class CoverageWatch:
    cluster: Cluster
    up: Callable[[], frozenset[str]]
    every: float = 0.2
    reads: list[Read] = field(default_factory=list)

    async def read_once(self) -> Read:
        up_before = self.up()
        before = time.monotonic()
        try:
            view = await self.cluster.view()
        except StoreError:
            read = Read(before, time.monotonic(), None, SHARD_COUNT, {})
        else:
            up = up_before & self.up()
            held = sum(1 for lease in view.leases
                       if lease.owner in up and lease.expires_at > view.now)
            beats = {w.worker_id: w.heartbeat_at for w in view.workers if w.worker_id in up}
            read = Read(before, time.monotonic(), held == SHARD_COUNT, SHARD_COUNT - held,
                        beats)
        self.reads.append(read)
        return read

    async def run(self) -> None:
        while True:
            await self.read_once()
            await asyncio.sleep(self.every)


def episodes(reads: Iterable[Read]) -> list[Episode]:
    """The runs of uncovered reads, in order."""
    found: list[Episode] = []
    run: list[Read] = []
    for read in reads:
        if not read.owned:
            run.append(read)
            continue
        if run:
            found.append(_episode(run, read.after))
            run = []
    if run:
        found.append(_episode(run, None))
    return found


def _episode(run: list[Read], owned_by: float | None) -> Episode:
    return Episode(run[0].before, run[0].after, run[-1].before, owned_by,
                   max(r.uncovered for r in run), sum(1 for r in run if r.covered is None))


@dataclass(frozen=True, slots=True)
class RoundGap:
    """Seconds between two consecutive heartbeats of ``worker`` (store clock); ``seen``
    is when the watch first saw the second one (monotonic)."""

    seconds: float
    worker: str
    seen: float


def round_gaps(reads: Iterable[Read], spans: Iterable[tuple[float, float]]) -> list[RoundGap]:
    """The gaps between consecutive heartbeats of each worker made within one of
    ``spans`` (monotonic ``[from, to)``): a worker's heartbeat the span's first read
    shows was made before it (during a fault, perhaps), so it begins no gap."""
    gaps: list[RoundGap] = []
    for start, end in spans:
        before: dict[str, float] = {}
        beats: dict[str, list[tuple[float, float]]] = {}
        for read in reads:
            if not start <= read.before < end:
                continue
            for worker, beat in read.heartbeats.items():
                seen = beats.setdefault(worker, [])
                if worker not in before:
                    before[worker] = beat
                elif beat > (seen[-1][0] if seen else before[worker]):
                    seen.append((beat, read.before))
        for worker, seen in beats.items():
            gaps.extend(RoundGap(b[0] - a[0], worker, b[1])
                        for a, b in itertools.pairwise(seen))
    return gaps
