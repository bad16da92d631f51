"""The end of a one-shot crawl: CPU while it waits for retries, and its final line.

    .venv/bin/python bench/linger_bench.py [--before-src DIR/src] [--repeat 3]
        [--hosts 5] [--linger 70]

A test web of ``--hosts`` hosts whose robots.txt answers 500 is served on loopback in
this process (``startup_bench.ServedWeb``): a polite crawler fetches nothing else there,
retries robots.txt later, and lingers up to ``--linger`` seconds for those retries. The
crawl's process CPU (``/proc/PID/stat``, all threads) is read every second; the figure is
the CPU it spends per second of wall time between the first robots.txt attempts and the
retry (from 3 s after the first batch of requests the server logged to 1 s before the
next), as a share of one core. With the default linger of 70 s the crawl makes its first
attempts, retries them once (60 s later, the robots back-off), and ends. Each tree's runs
alternate with the other's; the last line each crawl printed is shown too.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from startup_bench import HERE_SRC, ServedWeb, child_env, process_cpu


def linger_run(web: ServedWeb, src: Path, data: Path, linger: float
               ) -> tuple[float, float, float, str]:
    """(CPU share of a core while waiting, whole wall s, whole CPU s, final line)."""
    samples: list[tuple[float, float]] = []  # (monotonic, CPU s)
    start = time.monotonic()
    web.server.log.clear()
    with (data.parent / f"{data.name}.stderr").open("w") as errors:
        child = subprocess.Popen(
            [sys.executable, "-m", "courtier", *web.crawl_argv(data, "--linger", str(linger))],
            env=child_env(src), stdout=subprocess.PIPE, stderr=errors, text=True)
        try:
            while child.poll() is None and time.monotonic() - start < linger + 300:
                try:
                    samples.append((time.monotonic(), process_cpu(child.pid)))
                except (FileNotFoundError, ProcessLookupError, ValueError):
                    break
                time.sleep(1.0)
        finally:
            if child.poll() is None:
                child.kill()
            out, _ = child.communicate(timeout=60)
    wall = time.monotonic() - start
    if child.returncode != 0:
        raise SystemExit(f"courtier crawl exited {child.returncode}; see {errors.name}")
    starts = sorted(r.start for r in web.server.log)
    if not starts:
        raise SystemExit("the test web saw no request")
    batches = [starts[0]] + [b for a, b in itertools.pairwise(starts) if b - a > 5]
    if len(batches) < 2:
        raise SystemExit(f"no retry within the crawl (requests at {starts})")
    begin, end = batches[0] + 3.0, batches[1] - 1.0
    span = [s for s in samples if begin <= s[0] <= end]
    if len(span) < 2:
        raise SystemExit("too few CPU samples in the waiting span")
    share = (span[-1][1] - span[0][1]) / (span[-1][0] - span[0][0])
    last = out.strip().splitlines()[0] if out.strip() else ""
    return share, wall, samples[-1][1] if samples else 0.0, last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before-src", type=Path, help="another src/ tree to compare with")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hosts", type=int, default=5)
    ap.add_argument("--linger", type=float, default=70.0)
    args = ap.parse_args()
    from courtier.testweb.spec import HostSpec

    trees = {"this tree": HERE_SRC}
    if args.before_src:
        trees["before"] = args.before_src
    runs: dict[str, list[tuple[float, float, float, str]]] = {t: [] for t in trees}
    with tempfile.TemporaryDirectory(prefix="linger-bench-") as folder:
        specs = [HostSpec(f"h{i:02d}.courtier.test", pages=5, robots="500")
                 for i in range(args.hosts)]
        web = ServedWeb(Path(folder), specs)
        try:
            for i in range(args.repeat):
                for n, (tree, src) in enumerate(trees.items()):
                    runs[tree].append(linger_run(web, src, Path(folder) / f"run-{i}-{n}",
                                                 args.linger))
        finally:
            web.close()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for tree, xs in runs.items():
        shares = [x[0] for x in xs]
        print(f"{tree:>9}: CPU while waiting median {100 * statistics.median(shares):.2f} % "
              f"of a core (min {100 * min(shares):.2f}, max {100 * max(shares):.2f}); whole "
              f"crawl median {statistics.median(x[1] for x in xs):.1f} s wall, "
              f"{statistics.median(x[2] for x in xs):.2f} CPU-s, n={len(xs)}")
        print(f"{'':>9}  final line: {xs[-1][3]}")


if __name__ == "__main__":
    main()
