"""Start-up time of the ``courtier`` command: help and a query command.

Runs each command ``--repeat`` times in fresh interpreters, alternating with a
bare ``python -c pass`` (the interpreter's own floor) and, with
``--before-src``, with another source tree (e.g. ``git archive REF src``
unpacked somewhere), so that before/after figures share the machine's load.

    .venv/bin/python bench/startup_bench.py --data CRAWL_DATA [--before-src DIR/src]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE_SRC = Path(__file__).resolve().parents[1] / "src"


def timed(argv: list[str], src: Path | None) -> float:
    env = {"PYTHONPATH": str(src)} if src else {}
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, help="a crawl's --data for `courtier stats`")
    ap.add_argument("--before-src", type=Path, help="another src/ tree to compare with")
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    trees = {"this tree": HERE_SRC}
    if args.before_src:
        trees["before"] = args.before_src
    commands = {"courtier --help": ["--help"]}
    if args.data:
        commands["courtier stats --data"] = ["stats", "--data", str(args.data)]
    runs: dict[tuple[str, str], list[float]] = {(c, t): [] for c in commands for t in trees}
    floor: list[float] = []
    for _ in range(args.repeat):
        floor.append(timed([sys.executable, "-c", "pass"], None))
        for name, argv in commands.items():
            for tree, src in trees.items():
                runs[(name, tree)].append(timed([sys.executable, "-m", "courtier", *argv], src))
    print(f"{'python -c pass':28} median {statistics.median(floor):.3f} s")
    for (name, tree), xs in runs.items():
        print(f"{name:22} {tree:>9}  median {statistics.median(xs):.3f} s "
              f"(min {min(xs):.3f}, max {max(xs):.3f}, n={len(xs)})")


if __name__ == "__main__":
    main()
