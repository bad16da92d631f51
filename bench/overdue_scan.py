"""The cost of one turn's look for overdue fetches (``InFlight.overdue``, asked every
turn of the worker loop) with N fetches under way, none overdue: this tree's against
another tree's ``crawl/in_flight.py``, in one run, alternating.

    .venv/bin/python bench/overdue_scan.py BEFORE/src/courtier/crawl/in_flight.py
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import time
from pathlib import Path
from types import ModuleType

from courtier.core.clock import VirtualClock
from courtier.frontier.lease import Lease, LeaseKind

HERE = Path(__file__).resolve().parent.parent / "src/courtier/crawl/in_flight.py"


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def per_turn(module: ModuleType, fetches: int, turns: int) -> float:
    """Seconds one ``overdue`` call takes, over ``turns`` calls."""
    clock = VirtualClock(1000.0)
    in_flight = module.InFlight(lambda: None, clock)
    gate = asyncio.Event()

    async def held(_: Lease) -> None:
        await gate.wait()

    for i in range(fetches):
        in_flight.start(Lease(LeaseKind.PAGE, f"http://h{i}.test", f"http://h{i}.test/",
                              issued_at=0.0, epoch=1, delay=0.0), held)
    await asyncio.sleep(0)
    began = time.perf_counter()
    for _ in range(turns):
        in_flight.overdue(clock.now() + 10.0, 100.0)
    took = (time.perf_counter() - began) / turns
    gate.set()
    await in_flight.settle()
    return float(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="the other tree's crawl/in_flight.py")
    parser.add_argument("--fetches", type=int, nargs="+", default=[256, 2048, 8192])
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    before, after = load(args.before, "before_in_flight"), load(HERE, "after_in_flight")
    for n in args.fetches:
        b = min(asyncio.run(per_turn(before, n, args.turns)) for _ in range(3))
        a = min(asyncio.run(per_turn(after, n, args.turns)) for _ in range(3))
        print(f"{n:>6} fetches: before {b * 1e6:9.1f} us a turn, after {a * 1e6:7.2f} us,"
              f" before / after {b / a:,.0f}")


if __name__ == "__main__":
    main()
