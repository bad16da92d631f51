"""How late the event loop runs: a periodic task that measures its own lateness.

The crawler is one asyncio loop per process; anything that blocks it delays
every host's timers and every fetch (DESIGN §3: no input may hold it for more
than ~50 ms). :class:`LoopLagMonitor` sleeps ``interval`` seconds at a time
and records how much later than asked it woke up: that lateness is the time
the loop spent on something else without yielding. Each sample goes to the
histogram ``courtier_event_loop_lag_seconds``; the longest one seen is the
gauge ``courtier_event_loop_lag_max_seconds`` and :attr:`longest`. A lag of
``stall_after`` seconds or more (1 s by default) is also logged (``event_loop_stalled``,
warning) with what the process did meanwhile: the CPU time of its threads and how often
the kernel preempted it. CPU near the lag says the process computed (the loop without
yielding, or a thread holding the GIL); CPU near 0 says the process waited — a blocking
system call, a machine that did not schedule it (many preemptions), or a SIGSTOP. A
stall of seconds lets a worker's shard leases lapse, and this line tells which it was.

:func:`log_tasks` is the other half of "what is the loop doing": every task of the
loop with the await it is parked on (``courtier worker`` logs it on SIGUSR1), for a
process that is alive but does not move on.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import resource
import time
from collections.abc import Callable

from courtier.core.logs import log_event
from courtier.crawl.metrics import CrawlMetrics

log = logging.getLogger("courtier.loop")

LAG_INTERVAL = 0.05  # seconds between two samples
#: seconds between two samples while the crawl is idle (waiting for retries): twenty
#: samples a second were most of a lingering crawl's CPU (0.3 % of a core of its 0.38 %,
#: bench/README.md "The end of a crawl"), for a loop that had nothing to run
IDLE_LAG_INTERVAL = 1.0
#: a lag at least this long is logged (event ``event_loop_stalled``)
STALL_AFTER = 1.0


class LoopLagMonitor:
    """Samples the running loop's lag until :meth:`stop`; every ``idle_interval`` instead
    of ``interval`` while ``idle()`` says the crawl only waits (a stall that begins then
    is still measured, from the time the sample was due)."""

    def __init__(self, metrics: CrawlMetrics | None = None,
                 interval: float = LAG_INTERVAL, idle: Callable[[], bool] | None = None,
                 idle_interval: float = IDLE_LAG_INTERVAL,
                 stall_after: float = STALL_AFTER) -> None:
        self.metrics = metrics
        self.stall_after = stall_after
        #: stalls logged (lags of at least ``stall_after``)
        self.stalls = 0
        self.interval = interval
        self.idle = idle
        self.idle_interval = idle_interval
        self.longest = 0.0
        self.samples = 0
        self._task: asyncio.Task[None] | None = None
        #: set on every sample (tests wait on it)
        self.sampled = asyncio.Event()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="courtier-loop-lag")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            pause = self.idle_interval if self.idle is not None and self.idle() \
                else self.interval
            asked = loop.time() + pause
            cpu, preempted = time.process_time(), _preemptions()
            await asyncio.sleep(pause)
            lag = max(0.0, loop.time() - asked)
            self.record(lag)
            if lag >= self.stall_after:
                self.stalls += 1
                cpu = time.process_time() - cpu
                preempted = _preemptions() - preempted
                log_event(log, logging.WARNING, "event_loop_stalled",
                          "the event loop ran %.2f s late; meanwhile this process used "
                          "%.2f CPU-s and was preempted %d times (%s)", lag, cpu, preempted,
                          "it computed: the loop without yielding, or a thread holding "
                          "the GIL" if cpu >= lag / 2 else
                          "it waited: a blocking call, or the machine did not run it",
                          seconds=round(lag, 3), cpu_seconds=round(cpu, 3),
                          preempted=preempted)

    def record(self, lag: float) -> None:
        self.samples += 1
        self.sampled.set()
        if lag > self.longest:
            self.longest = lag
            if self.metrics is not None:
                self.metrics.loop_lag_max.set(lag)
        if self.metrics is not None:
            self.metrics.loop_lag.observe(lag)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _preemptions() -> int:
    """Involuntary context switches of this process so far (the kernel took the CPU)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw


def log_tasks() -> None:
    """Log every task of the running loop with its stack (where each one awaits)."""
    tasks = asyncio.all_tasks()
    out = io.StringIO()
    for task in sorted(tasks, key=lambda t: t.get_name()):
        print(f"--- {task!r}", file=out)
        task.print_stack(limit=20, file=out)
    log.warning("%d tasks of the event loop:\n%s", len(tasks), out.getvalue())
