"""Start-up time of the ``courtier`` command: help, a query command, and a crawl.

Runs each command ``--repeat`` times in fresh interpreters, alternating with a
bare ``python -c pass`` (the interpreter's own floor) and, with
``--before-src``, with another source tree (e.g. ``git archive REF src``
unpacked somewhere, or a worktree's ``src``), so that before/after figures share
the machine's load.

    .venv/bin/python bench/startup_bench.py --data CRAWL_DATA [--before-src DIR/src]
        [--before-data COPY_OF_CRAWL_DATA]
    .venv/bin/python bench/startup_bench.py --crawl [--before-src DIR/src] [--repeat 5]

``--crawl`` measures ``courtier crawl`` (a new ``--data`` each run) up to the first
request the test web sees: a :class:`TestWebServer` in this process serves one host on
loopback and holds that host's ``/robots.txt`` request; the moment it arrives, the
crawl process's CPU seconds (user + system of all its threads, ``/proc/PID/stat``) are
read, then the request is let go and the crawl runs to its end (``--pages`` pages), whose
whole-process CPU (``wait4``) is the second figure. One uncounted run per tree comes
first (it writes the tree's bytecode, and numba may compile the SimHash kernels into its
cache).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from courtier.testweb.server import HeldResponse

T = TypeVar("T")

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


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far: all its threads, ended ones
    included (``/proc/PID/stat``, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class LoopThread:
    """An event loop running in a thread of its own (the test web's), so that this
    process can wait for a child while the loop serves it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class ServedWeb:
    """Test hosts (``host_specs``: :class:`HostSpec` values) served on loopback by a
    :class:`TestWebServer` in this process, with their hosts and seeds files."""

    def __init__(self, folder: Path, host_specs: list[Any]) -> None:
        from courtier.testweb.server import TestWebServer
        from courtier.testweb.spec import WebSpec

        self.loop = LoopThread()
        self.server = TestWebServer(WebSpec(host_specs))
        self.loop.submit(self.server.start()).result(60)
        self.first_host = host_specs[0].name
        self.hosts = folder / "hosts.txt"
        self.seeds = folder / "seeds.txt"
        self.hosts.write_text(self.server.web.hosts_file_text())
        self.seeds.write_text("".join(f"{seed}\n" for seed in self.server.web.seeds()))

    def crawl_argv(self, data: Path, *extra: str) -> list[str]:
        return ["crawl", "--resolve", str(self.hosts), "--allow-network", "127.0.0.0/8",
                "--seeds-file", str(self.seeds), "--data", str(data), "--delay", "0",
                "--progress", "none", *extra]

    def first_request(self, pid: int, started: float) -> Future[tuple[float, float]]:
        """(wall s since ``started``, CPU s of ``pid``) when the first host's robots.txt
        request arrives; that request is then answered."""

        async def hold_robots() -> HeldResponse:
            return self.server.hold_next(self.first_host, "/robots.txt")

        held = self.loop.submit(hold_robots()).result(60)

        async def at_arrival() -> tuple[float, float]:
            try:
                await asyncio.wait_for(held.arrived.wait(), 300)
                return time.perf_counter() - started, process_cpu(pid)
            finally:
                held.release()

        return self.loop.submit(at_arrival())

    def close(self) -> None:
        self.loop.submit(self.server.stop()).result(60)
        self.loop.close()


def child_env(src: Path) -> dict[str, str]:
    """The environment of a ``courtier`` child running the tree ``src``: bytecode is
    written and then used, as an installed package has it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(src)
    return env


def crawl_run(web: ServedWeb, src: Path, data: Path) -> tuple[float, float, float, float]:
    """(wall, CPU) to the first request and (wall, CPU) of the whole crawl of ``web``,
    run from the tree ``src`` into the new folder ``data``."""
    cpu, start = _children_cpu(), time.perf_counter()
    with (data.parent / f"{data.name}.stderr").open("w") as errors:
        child = subprocess.Popen([sys.executable, "-m", "courtier", *web.crawl_argv(data)],
                                 env=child_env(src), stdout=subprocess.DEVNULL,
                                 stderr=errors)
        arrival = web.first_request(child.pid, start)
        try:
            first_wall, first_cpu = arrival.result(330)
        finally:
            if not arrival.done():
                child.kill()
            child.wait(600)
    whole_wall, whole_cpu = time.perf_counter() - start, _children_cpu() - cpu
    if child.returncode != 0:
        raise SystemExit(f"courtier crawl exited {child.returncode}; see {errors.name}")
    return first_wall, first_cpu, whole_wall, whole_cpu


def crawl_bench(trees: dict[str, Path], repeat: int, pages: int) -> None:
    """Alternating crawls of each tree: CPU to the first request, CPU of the whole crawl."""
    runs: dict[str, list[tuple[float, float, float, float]]] = {t: [] for t in trees}
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as folder:
        from courtier.testweb.spec import HostSpec

        web = ServedWeb(Path(folder), [HostSpec("h00.courtier.test", pages=pages)])
        try:
            for n, src in enumerate(trees.values()):  # uncounted: numba's cache, bytecode
                crawl_run(web, src, Path(folder) / f"warm-{n}")
            for i in range(repeat):
                for n, (tree, src) in enumerate(trees.items()):
                    runs[tree].append(crawl_run(web, src, Path(folder) / f"run-{i}-{n}"))
        finally:
            web.close()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for tree, xs in runs.items():
        for label, wall, cpu in (
                ("crawl: to 1st request", [x[0] for x in xs], [x[1] for x in xs]),
                (f"crawl: whole, {pages} pages", [x[2] for x in xs], [x[3] for x in xs])):
            print(f"{label:26} {tree:>9}  wall median {statistics.median(wall):.3f} s, "
                  f"CPU median {statistics.median(cpu):.3f} s "
                  f"(min {min(cpu):.3f}, max {max(cpu):.3f}), n={len(xs)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, help="a crawl's --data for `courtier stats`")
    ap.add_argument("--before-src", type=Path, help="another src/ tree to compare with")
    ap.add_argument("--before-data", type=Path,
                    help="a copy of --data for the other tree (when this tree migrates the "
                         "store to a schema the other tree refuses)")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--crawl", action="store_true",
                    help="measure `courtier crawl` to its first request (module docstring)")
    ap.add_argument("--pages", type=int, default=10, help="pages of the --crawl test host")
    args = ap.parse_args()
    trees = {"this tree": HERE_SRC}
    if args.before_src:
        trees["before"] = args.before_src
    if args.crawl:
        crawl_bench(trees, args.repeat, args.pages)
        return
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
