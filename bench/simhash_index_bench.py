"""SimHashIndex at scale: build time, query latency (p50/p99) and memory.

    .venv/bin/python bench/simhash_index_bench.py [--items 1000000] [--queries 20000]

Builds an index of ``--items`` random 64-bit fingerprints in bulk
(``add_many``), times ``--queries`` lookups (half are planted
near-duplicates at distance 1–3, half random misses), and reports memory as
the traced Python/numpy allocation (tracemalloc) and the index's own array
bytes. A second, smaller run times one-at-a-time ``add`` (pending buffer +
merges).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import tracemalloc

from courtier.dedup.simhash_index import SimHashIndex


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--incremental", type=int, default=200_000)
    parser.add_argument("--blocks", type=int, default=None)
    args = parser.parse_args()
    rng = random.Random(42)
    fps = [rng.getrandbits(64) for _ in range(args.items)]

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    index = SimHashIndex(3, args.blocks)
    index.add_many(fps, range(args.items))
    build = time.perf_counter() - start
    index.near(0)  # builds the lazy bucket-offset lists, so they are in the figure
    traced = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()

    queries = []
    for i in range(args.queries):
        if i % 2 == 0:
            fp = fps[rng.randrange(args.items)]
            for bit in rng.sample(range(64), rng.randint(1, 3)):
                fp ^= 1 << bit
            queries.append((fp, True))
        else:
            queries.append((rng.getrandbits(64), False))
    latencies = []
    found = 0
    for fp, planted in queries:
        t0 = time.perf_counter()
        hits = index.near(fp)
        latencies.append((time.perf_counter() - t0) * 1e6)
        found += planted and bool(hits)

    print(f"SimHashIndex(max_distance=3, blocks={index.blocks}): {index.tables} tables")
    print(f"items                : {len(index):,}")
    print(f"build (add_many)     : {build:.2f} s ({build / args.items * 1e6:.2f} µs/item)")
    print(
        f"query latency        : p50 {percentile(latencies, 0.50):.1f} µs, "
        f"p99 {percentile(latencies, 0.99):.1f} µs, mean {statistics.fmean(latencies):.1f} µs"
    )
    print(f"planted found        : {found}/{args.queries // 2 + args.queries % 2}")
    print(
        f"memory (tracemalloc) : {traced / 2**20:.1f} MiB ({traced / args.items:.1f} B/item); "
        f"index arrays {index.memory_bytes() / 2**20:.1f} MiB"
    )

    n = min(args.incremental, args.items)
    incremental = SimHashIndex(3, args.blocks)
    start = time.perf_counter()
    for i in range(n):
        incremental.add(fps[i], i)
    elapsed = time.perf_counter() - start
    print(
        f"incremental add      : {n:,} items in {elapsed:.2f} s ({elapsed / n * 1e6:.2f} µs/item)"
    )


if __name__ == "__main__":
    main()
