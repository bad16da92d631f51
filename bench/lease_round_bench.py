"""How long a coordinator's lease round takes on Citus under load (issue 30).

    python bench/lease_round_bench.py                        # this tree, a cluster of its own
    python bench/lease_round_bench.py --tree /path/to/other/checkout --tree .   # alternated
    python bench/lease_round_bench.py --runs 3 --seconds 40 --burn 2 --writers 2

Starts the local Citus cluster of tests/citus_cluster.py (a coordinator and two worker
nodes, throwaway servers on loopback ports). For each run and each ``--tree`` (a checkout
of courtier; its ``src`` is put first on the child's ``PYTHONPATH``, so the trees'
coordinators and stores are compared on one cluster, alternately), a new database of the
cluster and a child process of this script that runs, for ``--seconds``:

- ``--workers`` shard coordinators (``cluster/coordinator.py``), each with a store of its
  own, at ``--lease-ttl``: a round every ``--lease-ttl``/6 as a worker runs them, the
  shards the plan hands over released at once (a worker's drain, without the crawl);
- ``--writers`` tasks adding batches of 200 new URLs over every shard (the intake on
  both nodes: multi-node two-phase commits, the database load of a crawl's links);

while ``--burn`` busy loops (processes of their own) keep the cores busy. Each round is
timed by the worker's clock, whole and by store call (heartbeat, view, acquisition). A
round whose time passes ``0.75 × --lease-ttl`` (the fence margin of a lease) would have
made its worker fence itself. Prints one line per tree and run; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: calls of a round, in the order the round makes them
CALLS = ("heartbeat", "cluster_view", "acquire_shards")


class _Timed:
    """The store, with each call of :data:`CALLS` timed into ``spent`` (seconds)."""

    def __init__(self, store: Any, spent: dict[str, float]) -> None:
        self._store = store
        self._spent = spent

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name not in CALLS:
            return attr

        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.monotonic()
            try:
                return await attr(*args, **kwargs)
            finally:
                self._spent[name] = self._spent.get(name, 0.0) + time.monotonic() - start

        return timed


async def _coordinate(dsn: str, worker_id: str, ttl: float, until: float,
                      rounds: list[dict[str, float]]) -> None:
    from courtier.cluster.coordinator import LeaseSettings, ShardCoordinator
    from courtier.core.clock import RealClock
    from courtier.store.postgres import PostgresStore

    store = PostgresStore(dsn, max_size=2)
    await store.open()
    spent: dict[str, float] = {}
    coordinator = ShardCoordinator(_Timed(store, spent), worker_id, RealClock(),
                                   LeaseSettings(ttl))
    try:
        while time.monotonic() < until:
            spent.clear()
            start = time.monotonic()
            changes = await coordinator.round()
            took = time.monotonic() - start
            if changes.handover:
                await coordinator.release(set(changes.handover))
            rounds.append({"round": took, **spent, "gained": len(changes.gained)})
            await asyncio.sleep(max(0.0, ttl / 6 - took))
    finally:
        await store.close()


async def _write(dsn: str, until: float, seed: int) -> int:
    from courtier.core.urls import canonicalize
    from courtier.store.base import NewUrl
    from courtier.store.postgres import PostgresStore

    store = PostgresStore(dsn, max_size=2)
    await store.open()
    rng, added = random.Random(seed), 0
    try:
        while time.monotonic() < until:
            batch = []
            for _ in range(200):
                c = canonicalize(f"http://h{rng.randrange(10_000)}.test/{rng.random()}")
                batch.append(NewUrl(c.url_key, c.url, c.host_key, c.shard, 0, 0,
                                    1_700_000_000.0, 1_700_000_000.0))
            added += await store.add_urls(batch)
    finally:
        await store.close()
    return added


async def _child(dsn: str, workers: int, writers: int, ttl: float, seconds: float) -> None:
    import courtier
    from courtier.store.postgres import PostgresStore

    schema = PostgresStore(dsn, max_size=1)  # the migrations and Citus's placement first
    await schema.open()
    await schema.close()
    until = time.monotonic() + seconds
    per_worker: list[list[dict[str, float]]] = [[] for _ in range(workers)]
    jobs: list[Awaitable[Any]] = [
        _coordinate(dsn, f"w{i}", ttl, until, per_worker[i]) for i in range(workers)]
    jobs += [_write(dsn, until, seed) for seed in range(writers)]
    results = await asyncio.gather(*jobs)
    print(json.dumps({"courtier": courtier.__file__, "rounds": per_worker,
                      "urls": sum(r for r in results if isinstance(r, int))}))


def _burn(n: int) -> list[subprocess.Popen[bytes]]:
    loop = "while True: pass"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(n)]


def _summary(tree: str, run: int, ttl: float, out: dict[str, Any], load: str) -> str:
    # the first round of each worker takes its shards (a join): timed apart
    later = [r for rounds in out["rounds"] for r in rounds[1:]]
    times = sorted(r["round"] for r in later)
    firsts = ", ".join(f"{rounds[0]['round']:.2f}" for rounds in out["rounds"] if rounds)
    if not times:
        return f"{tree} run {run}: no round after the first (first rounds: {firsts} s)"
    margin = 0.75 * ttl
    calls = defaultdict(list)
    for r in later:
        for name in CALLS:
            if name in r:
                calls[name].append(r[name])
    parts = ", ".join(f"{name} {statistics.mean(v):.3f} s ×{len(v)}"
                      for name, v in calls.items())
    p95 = times[int(0.95 * (len(times) - 1))] if times else 0.0
    return (f"{tree} run {run}: {len(times)} rounds, median {statistics.median(times):.3f} s,"
            f" p95 {p95:.3f} s, max {max(times):.3f} s, over {margin:.2f} s:"
            f" {sum(t > margin for t in times)}; mean a call: {parts};"
            f" first rounds {firsts} s; {out['urls']} URLs added; load {load}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[],
                        help="a courtier checkout to time (repeat: alternated); default .")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--burn", type=int, default=0, help="busy loops while it runs")
    parser.add_argument("--lease-ttl", type=float, default=3.0)
    parser.add_argument("--child", help=argparse.SUPPRESS)  # the DSN, in a child
    args = parser.parse_args()
    if args.child:
        asyncio.run(_child(args.child, args.workers, args.writers, args.lease_ttl,
                           args.seconds))
        return
    from tests.citus_cluster import citus_cluster

    trees = [str(Path(t).resolve()) for t in (args.tree or ["."])]
    with citus_cluster() as cluster:
        for run in range(1, args.runs + 1):
            for tree in trees:
                with cluster.database("rounds") as dsn:
                    burners = _burn(args.burn)
                    try:
                        env = {**os.environ, "PYTHONPATH": f"{tree}/src"}
                        child = subprocess.run(
                            [sys.executable, __file__, "--child", dsn,
                             "--workers", str(args.workers), "--writers", str(args.writers),
                             "--seconds", str(args.seconds),
                             "--lease-ttl", str(args.lease_ttl)],
                            env=env, check=True, capture_output=True, text=True)
                        load = os.getloadavg()
                    finally:
                        for p in burners:
                            p.kill()
                            p.wait()
                out = json.loads(child.stdout.strip().splitlines()[-1])
                assert out["courtier"].startswith(tree), out["courtier"]
                stamp = time.strftime("%H:%M:%S", time.gmtime())
                print(_summary(tree, run, args.lease_ttl, out,
                               f"{load[0]:.1f} ({stamp} UTC)"), flush=True)


if __name__ == "__main__":
    main()
