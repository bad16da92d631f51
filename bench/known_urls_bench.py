"""Memory per key and lookup cost of the owner-local URL state (dedup/known_urls.py).

    .venv/bin/python bench/known_urls_bench.py                 # 1 M and 10 M keys
    .venv/bin/python bench/known_urls_bench.py --sizes 10000000

Each size runs in a fresh process: the keys of all 1,024 shards are loaded the way a
worker loads them (sorted 64 k-key parts per shard, then ``finish``), then 1/64 of
them more are added one commit batch at a time (the recent sets and their merges), and
the process's VmRSS is read before and after; a Python ``set`` of the same keys is
measured by its RSS growth for comparison. Bytes per key are the structure's own (its
arrays, recent sets and their bytes objects, counted exactly). Then ``knows`` is timed
on known and new keys.
Prints one line per size; times are CPU time of the process (time.process_time).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def vm_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def child(size: int) -> dict[str, float]:
    import numpy as np

    from courtier.core.urls import SHARD_COUNT, shard_of_key
    from courtier.crawl.known_loader import split_by_shard
    from courtier.dedup.known_urls import KnownUrls

    rng = np.random.default_rng(7)
    raw = np.sort(np.frombuffer(rng.bytes(16 * size), dtype="S16"))
    known = KnownUrls(cap=4 * size)
    began = time.process_time()
    for shard, run in split_by_shard(raw).items():  # the loader's parts, per shard
        known.start(shard)
        for at in range(0, len(run), 65_536):
            known.loaded_part(shard, run[at:at + 65_536].copy())
        known.finish(shard)
    for shard in range(SHARD_COUNT):
        if not known.is_complete(shard):
            known.start(shard)
            known.finish(shard)
    load_s = time.process_time() - began
    extra = [rng.bytes(16) for _ in range(size // 64)]
    began = time.process_time()
    for at in range(0, len(extra), 2000):  # one commit batch of new URLs at a time
        known.add(extra[at:at + 2000])
    add_s = time.process_time() - began
    probes_known = [bytes(k).ljust(16, b"\0") for k in raw[:: max(1, size // 20_000)]]
    sample = raw[: min(size, 2_000_000)].copy()
    del raw
    # the structure's own bytes: the arrays, the recent sets and their bytes objects (an
    # RSS difference is blurred by the allocator keeping what numpy's sorts freed)
    held = known.nbytes() + sum(
        sys.getsizeof(st.recent) + sum(sys.getsizeof(k) for k in st.recent)
        for st in known._shards.values())
    rss = vm_rss() - sample.nbytes
    probes_new = [rng.bytes(16) for _ in range(20_000)]
    began = time.process_time()
    hits = sum(bool(known.knows(k, shard_of_key(k))) for k in probes_known)
    known_us = (time.process_time() - began) / len(probes_known) * 1e6
    began = time.process_time()
    misses = sum(known.knows(k, shard_of_key(k)) is False for k in probes_new)
    new_us = (time.process_time() - began) / len(probes_new) * 1e6
    assert hits == len(probes_known) and misses == len(probes_new)
    keys = len(known)
    del known
    base = vm_rss()
    as_set = {bytes(k) for k in sample}
    set_bytes = (vm_rss() - base) / len(as_set)
    del as_set
    return {"keys": keys, "bytes_per_key": held / keys, "rss_with_set_mb": rss / 1e6,
            "load_s": load_s,
            "add_us_per_key": add_s / max(1, len(extra)) * 1e6, "knows_known_us": known_us,
            "knows_new_us": new_us, "python_set_bytes_per_key": set_bytes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child)))
        return 0
    print(f"load average {os.getloadavg()[0]:.1f}")
    for size in a.sizes:
        env = dict(os.environ, PYTHONPATH=str(SRC))
        out = subprocess.run([sys.executable, __file__, "--child", str(size)], env=env,
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        print(f"{r['keys']:,} keys: {r['bytes_per_key']:.1f} B/key held (a Python set of "
              f"bytes: {r['python_set_bytes_per_key']:.0f} B/key); process RSS with the set "
              f"{r['rss_with_set_mb']:.0f} MB; load {r['load_s']:.2f} s; add "
              f"{r['add_us_per_key']:.2f} µs/key; knows: known {r['knows_known_us']:.2f} µs, "
              f"new {r['knows_new_us']:.2f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
