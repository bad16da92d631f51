"""The churn soak: three workers crawl a recrawled local web while faults come and go.

    .venv/bin/python bench/churn_soak.py --minutes 30 --seed 1
    .venv/bin/python bench/churn_soak.py --minutes 5 --gap 30 45     # a short try

Every 2-3 minutes (``--gap``) one of: ``kill -9`` of a worker, a graceful leave
(SIGTERM), a join, SIGSTOP for twice the lease TTL, an immediate restart of the
PostgreSQL server (a throwaway one, tests/pg_server.py). The soak itself is
tests/integration/cluster/churn.py (its docstring says what it judges and how); the
suite runs its 3-minute form (tests/integration/cluster/test_churn_soak.py).

Prints the faults with their times, the time until every shard was owned again after
each (bound: lease TTL + 5 s, wall clock), politeness violations, lost URLs, duplicate
events, and each worker's RSS when its warm-up ended (``--warm-up``) and at its end,
with the ratio (bound: within 10 % for every worker that lived 10 minutes past its
warm-up, one minute in a run shorter than 20 minutes). Exit status 1 when anything is
out of bounds.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.cluster.churn import (  # noqa: E402
    Outage,
    Soak,
    SoakReport,
    churn_cluster,
)
from tests.integration.cluster.harness import TTL  # noqa: E402

#: seconds after a fault by which every shard must be owned again (wall clock)
OWNED_AGAIN = TTL + 5.0


def wall_bound(_: Outage) -> float:
    return OWNED_AGAIN


def print_report(report: SoakReport, judged: float) -> list[str]:
    """Print the figures; return the problems (the soak's and the RSS ones)."""
    began = report.began
    print(f"\nsoak of {(report.ended - began) / 60:.1f} min: {len(report.faults)} faults "
          f"{dict(report.kinds())}")
    print(f"{'fault':16} {'at (s)':>8} {'owned again (s)':>16} {'shards out':>11} "
          f"{'settled (s)':>12}")
    by_label = {o.moment.label: o for o in report.outages}
    for fault in report.faults:
        for moment in fault.moments:
            outage = by_label[moment.label]
            seen = "never" if outage.seen is None else f"{outage.seen:.2f}"
            settled = "" if fault.settled is None or moment is not fault.moments[-1] else (
                f"{fault.settled - fault.moments[0].acted:.1f}")
            extra = f"  (server down {moment.downtime:.2f} s)" if moment.downtime else ""
            print(f"{moment.label:16} {moment.acted - began:8.1f} {seen:>16} "
                  f"{outage.worst:>11} {settled:>12}{extra}")
    worst = max((o.seen for o in report.outages if o.seen is not None), default=0.0)
    gap = report.round_gap
    print(f"longest until owned again {worst:.2f} s (bound {OWNED_AGAIN:.1f} s); longest "
          f"coordinator round outside faults {gap.seconds:.2f} s ({gap.worker}, "
          f"{gap.seen - began:.0f} s in)")
    print(f"requests {report.requests}, page requests {report.pages}, events {report.events}")
    print(f"politeness violations {len(report.violations)}; expected URLs never fetched "
          f"{len(report.never_fetched)}, without an event {len(report.without_event)}, not "
          f"fetched again after the last fault {len(report.not_recrawled)}; duplicate events "
          f"{len(report.duplicate_events)}, URLs with versions not 1..n "
          f"{len(report.version_gaps)}; exit codes {report.exit_codes}")
    for line in report.lapse_lines():
        print(line)
    problems = report.problems(wall_bound, OWNED_AGAIN) + report.rss_problems(judged)
    print(f"{'worker':8} {'lived (s)':>10} {'RSS warm (MiB)':>15} {'RSS end (MiB)':>14} "
          f"{'ratio':>6}")
    for rss in report.rss:
        warm = "-" if rss.warm is None else f"{rss.warm / 1024:.1f}"
        ratio = "-" if rss.ratio is None else f"{rss.ratio:.3f}"
        print(f"{rss.worker_id:8} {rss.lived:10.0f} {warm:>15} {rss.last / 1024:14.1f} "
              f"{ratio:>6}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gap", type=float, nargs=2, default=(120.0, 180.0),
                        metavar=("MIN", "MAX"), help="seconds between faults (120 180)")
    parser.add_argument("--warm-up", type=float, default=300.0,
                        help="seconds of a worker's life before its RSS is its base (300)")
    parser.add_argument("--keep", type=Path, help="keep the workers' logs in this folder")
    args = parser.parse_args()
    judged = args.warm_up + (600.0 if args.minutes >= 20 else 60.0)
    started = time.monotonic()
    # the bench's own store (the observer) loses its connections at each server restart;
    # its pool logs each failed reconnection with a traceback, which says nothing here
    logging.getLogger("asyncpg.pool").setLevel(logging.CRITICAL)

    def say(line: str) -> None:
        print(line, flush=True)

    async def soak(root: Path) -> SoakReport:
        async with churn_cluster(root) as (cluster, server):
            return await Soak(cluster, server, seconds=args.minutes * 60,
                              gap=(args.gap[0], args.gap[1]), seed=args.seed,
                              rss_every=10.0, warm_up=args.warm_up, say=say).run()

    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        report = asyncio.run(soak(args.keep))
    else:
        with tempfile.TemporaryDirectory(prefix="courtier-churn-") as tmp:
            report = asyncio.run(soak(Path(tmp)))
    problems = print_report(report, judged)
    print(f"took {(time.monotonic() - started) / 60:.1f} min")
    for problem in problems:
        print("PROBLEM:", problem)
    print("OK" if not problems else "FAILED")
    return 0 if not problems else 1


if __name__ == "__main__":
    raise SystemExit(main())
