"""Twenty ``kill -9`` at random moments of a crawl of the local test web, then a resume.

    .venv/bin/python bench/kill_loop.py [--kills 20] [--seed 7]

Prints what the final state holds: URLs fetched of those expected, duplicate
outbox events (must be 0), URLs without exactly one final event (must be none;
"final" is defined in courtier/testweb/killloop.py), the last run's exit
status (must be 0), WARC problems (must be none), politeness violations over
all runs with Crawl-delay hosts at their Crawl-delay (must be none), the
shortest gap across a restart, and how many URLs were fetched more than once
(those in flight or uncommitted at a kill).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from courtier.testweb.killloop import kill_loop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--pages", type=int, default=20)
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="courtier-killloop-") as tmp:
        report = asyncio.run(kill_loop(Path(tmp) / "data", args.kills, args.seed,
                                       args.hosts, args.pages))
    print(f"runs {report.runs}, killed {report.kills}, {time.monotonic() - started:.0f} s")
    print(f"fetched {report.fetched}/{report.expected} expected URLs; "
          f"{report.refetched} fetched more than once")
    print(f"duplicate events {report.duplicate_events}; URLs without a final event "
          f"{len(report.urls_without_event)}, with several "
          f"{len(report.urls_with_several_finals)}, events after the final "
          f"{len(report.events_after_final)}; last run exit {report.final_exit}")
    print(f"WARC files {report.warc_files}, problems {len(report.warc_problems)}; "
          f"politeness violations {len(report.violations_after_restarts)}")
    short = [g for g in report.restart_gaps if g[1] < g[2]]
    least = min((g[1] - g[2] for g in report.restart_gaps), default=None)
    print(f"gaps across restarts {len(report.restart_gaps)}, too short {len(short)}"
          + ("" if least is None else f", least margin {least:.3f} s"))
    print("OK" if report.ok else "FAILED")
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
