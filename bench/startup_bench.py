"""Start-up time of the ``courtier`` command: help and a query command.

Runs each command ``--repeat`` times in fresh interpreters, alternating with a
bare ``python -c pass`` (the interpreter's own floor) and, with
``--before-src``, with another source tree (e.g. ``git archive REF src``
unpacked somewhere), so that before/after figures share the machine's load.

    .venv/bin/python bench/startup_bench.py --data CRAWL_DATA [--before-src DIR/src]
        [--before-data COPY_OF_CRAWL_DATA]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE_SRC = Path(__file__).resolve().parents[1] / "src"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], src: Path | None) -> tuple[float, float]:
    """(wall s, CPU s) of one run: CPU is user + system of the child, which moves much
    less than wall time with the machine's load."""
    env = {"PYTHONPATH": str(src)} if src else {}
    cpu, start = _children_cpu(), time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    return time.perf_counter() - start, _children_cpu() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, help="a crawl's --data for `courtier stats`")
    ap.add_argument("--before-src", type=Path, help="another src/ tree to compare with")
    ap.add_argument("--before-data", type=Path,
                    help="a copy of --data for the other tree (when this tree migrates the "
                         "store to a schema the other tree refuses)")
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    trees = {"this tree": HERE_SRC}
    if args.before_src:
        trees["before"] = args.before_src
    commands = {"courtier --help": ["--help"]}
    if args.data:
        commands["courtier stats --data"] = ["stats", "--data", str(args.data)]
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {
        (c, t): [] for c in commands for t in trees}
    floor: list[tuple[float, float]] = []
    for _ in range(args.repeat):
        floor.append(timed([sys.executable, "-c", "pass"], None))
        for name, argv in commands.items():
            for tree, src in trees.items():
                if tree == "before" and args.before_data is not None:
                    argv = [str(args.before_data) if a == str(args.data) else a for a in argv]
                runs[(name, tree)].append(timed([sys.executable, "-m", "courtier", *argv], src))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for label, xs in [(("python -c pass", ""), floor), *runs.items()]:
        wall, cpu = [x[0] for x in xs], [x[1] for x in xs]
        print(f"{label[0]:22} {label[1]:>9}  wall median {statistics.median(wall):.3f} s "
              f"(min {min(wall):.3f}, max {max(wall):.3f}), CPU median "
              f"{statistics.median(cpu):.3f} s (min {min(cpu):.3f}), n={len(xs)}")


if __name__ == "__main__":
    main()
