"""Mutation check: do the tests notice when the politeness, frontier and cluster rules break?

Each mutation below is one small, deliberate change of behaviour (a delay ignored, a tie
broken the other way, a lease treated as expired too early). For each, the script copies
the tree (tracked files, as they are in the working tree) to a scratch folder, applies the
one change, runs the tests named for it against the copy, and reports whether they went
red ("killed") or stayed green ("SURVIVED"). An unmutated run of every named test comes
first: if it is not green, the figures would mean nothing and the script stops.

    .venv/bin/python bench/mutations.py                 # all mutations
    .venv/bin/python bench/mutations.py --only delay    # the ones whose name contains "delay"
    .venv/bin/python bench/mutations.py --list

Exit status: 0 when every mutation was killed, 1 when any survived, 2 on a setup error
(a mutation's text no longer found exactly once: the code moved, update the table).
Only loopback traffic (the tests' own); CI is unset for the runs (the copy has no
../shared conformance vectors beside it, whose tests then skip by design).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str          # relative to the repository root
    old: str           # must occur exactly once in the file
    new: str
    tests: tuple[str, ...]
    why: str           # the behaviour it breaks


_SIM_POLITENESS_TESTS = ("tests/sim/test_politeness_sim.py", "tests/sim/test_random_webs_sim.py",
                         "tests/sim/test_large_web_sim.py")
_POLITENESS_TESTS = ("tests/unit/politeness", *_SIM_POLITENESS_TESTS)
_FRONTIER_TESTS = ("tests/unit/frontier", *_SIM_POLITENESS_TESTS)
_CLUSTER_TESTS = ("tests/unit/cluster",)

MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "crawl_delay_ignored", "src/courtier/politeness/delays.py",
        "    asked = crawl_delay or 0.0\n", "    asked = 0.0\n",
        _POLITENESS_TESTS, "robots.txt Crawl-delay no longer lengthens the gap"),
    Mutation(
        "adaptive_delay_ignored", "src/courtier/politeness/delays.py",
        "    if timing.adaptive_delay > delay:\n        delay = timing.adaptive_delay\n",
        "", _POLITENESS_TESTS, "a slow host's adaptive delay is not applied"),
    Mutation(
        "throttle_ignored", "src/courtier/politeness/delays.py",
        "    if timing.throttle_delay > delay:\n        delay = timing.throttle_delay\n",
        "", _POLITENESS_TESTS, "the AIMD throttle after 429/503 is not applied"),
    Mutation(
        "retry_after_ignored", "src/courtier/politeness/delays.py",
        "        if retry_at is not None and retry_at > now:",
        "        if False:",
        _POLITENESS_TESTS, "Retry-After is not obeyed (exponential back-off instead)"),
    Mutation(
        "backoff_not_exponential", "src/courtier/politeness/delays.py",
        "(2 ** min(self.failures - 1, 20))", "1",
        _POLITENESS_TESTS, "repeated failures back off by a constant step"),
    Mutation(
        "retry_after_http_date_ignored", "src/courtier/politeness/delays.py",
        "    return max(now, parsed.timestamp())\n", "    return None\n",
        _POLITENESS_TESTS, "a Retry-After given as an HTTP-date is dropped"),
    Mutation(
        "robots_disallow_wins_ties", "src/courtier/politeness/robots_match.py",
        "(length == best_length and allow and not best_allow)",
        "(length == best_length and not allow and best_allow)",
        ("tests/unit/politeness",), "RFC 9309: an equally long Allow must win over Disallow"),
    Mutation(
        "robots_shortest_plain_match", "src/courtier/politeness/robots_match.py",
        "        for head_length, entries, floor in self._levels:\n"
        "            if floor < best_length:\n                break\n",
        "        for head_length, entries, floor in reversed(self._levels):\n"
        "            if floor < best_length:\n                break\n",
        ("tests/unit/politeness",),
        "RFC 9309, prefix rules: the shortest match decides instead of the longest"),
    Mutation(
        "robots_shortest_wildcard_match", "src/courtier/politeness/robots_match.py",
        "        for head_length, entries, floor in self._levels:\n"
        "            if floor < best_length:\n                break  # nothing",
        "        for head_length, entries, floor in reversed(self._levels):\n"
        "            if floor < best_length:\n                break  # nothing",
        ("tests/unit/politeness",),
        "RFC 9309, rules with '*': the shortest match decides instead of the longest"),
    Mutation(
        "host_delay_not_charged", "src/courtier/frontier/scheduler.py",
        "        host.next_allowed_at = now + delay\n", "        host.next_allowed_at = now\n",
        _FRONTIER_TESTS, "a lease does not push the host's next start by its delay"),
    Mutation(
        "ip_delay_not_charged", "src/courtier/frontier/scheduler.py",
        "            ip.next_allowed_at = max(ip.next_allowed_at, now + self.ip_delay)\n",
        "", _FRONTIER_TESTS, "hosts sharing an address do not share its gap"),
    Mutation(
        "in_flight_cap_off_by_one", "src/courtier/frontier/scheduler.py",
        "        if in_flight >= (policy.max_in_flight or self.max_in_flight) and in_flight >= 1:",
        "        if in_flight > (policy.max_in_flight or self.max_in_flight) and in_flight >= 1:",
        _FRONTIER_TESTS, "one request more than the per-host concurrency cap"),
    Mutation(
        "clock_not_restored", "src/courtier/cluster/host_clocks.py",
        "            at = max(at, clock.next_start_at - offset + error)\n", "",
        _CLUSTER_TESTS, "the new owner of a moved host ignores the saved next start"),
    Mutation(
        "takeover_no_wait", "src/courtier/cluster/host_clocks.py",
        "        at = max(at, gained_at + delay)\n", "",
        _CLUSTER_TESTS, "after a takeover the new owner does not wait one delay"),
    Mutation(
        "clock_offset_error_dropped", "src/courtier/cluster/host_clocks.py",
        "            at = max(at, clock.next_start_at - offset + error)\n",
        "            at = max(at, clock.next_start_at - offset)\n",
        _CLUSTER_TESTS, "the clock offset's uncertainty is not added to a restored start"),
    Mutation(
        "fence_without_margin", "src/courtier/cluster/membership.py",
        "    usable = lease_seconds * (1.0 - max_drift) - margin\n",
        "    usable = lease_seconds * (1.0 - max_drift)\n",
        _CLUSTER_TESTS, "a worker keeps fetching until the very end of its lease"),
    Mutation(
        "expired_lease_respected", "src/courtier/cluster/membership.py",
        "            and lease.expires_at > now\n        )\n",
        "        )\n",
        _CLUSTER_TESTS, "a dead owner's expired lease blocks its shard forever"),
    Mutation(
        "dead_worker_counted_live", "src/courtier/cluster/membership.py",
        "        if w.weight > 0 and w.heartbeat_at + worker_ttl > now\n",
        "        if w.weight > 0\n",
        _CLUSTER_TESTS, "a worker without heartbeats keeps its share of shards"),
    Mutation(
        "rendezvous_ignores_weight", "src/courtier/cluster/rendezvous.py",
        "    return -weight / math.log(uniform)\n", "    return -1.0 / math.log(uniform)\n",
        _CLUSTER_TESTS, "a worker's share no longer follows its weight"),
)


def _copy_tree(target: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in listed:
        if not name:
            continue
        source = ROOT / name
        if not source.is_file():
            continue  # deleted in the working tree
        dest = target / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest)


def _env(copy: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(copy / "src")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _check_copy_is_imported(copy: Path) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", "import courtier, sys; sys.stdout.write(courtier.__file__)"],
        cwd=copy, env=_env(copy), capture_output=True, text=True, check=True)
    if not probe.stdout.startswith(str(copy)):
        raise SystemExit(f"mutations: the copy is not what Python imports ({probe.stdout}); "
                         "install the project with `pip install -e .` (a path-based editable)")


def _run_tests(copy: Path, tests: tuple[str, ...]) -> tuple[bool, float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
        cwd=copy, env=_env(copy), capture_output=True, text=True)
    return done.returncode == 0, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="run the mutations whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if args.only in m.name]
    if args.list:
        for m in chosen:
            print(f"{m.name:32} {m.path}  ({m.why})")
        return 0
    if not chosen:
        print(f"mutations: none named like {args.only!r}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="courtier-mut-") as scratch:
        copy = Path(scratch) / "tree"
        _copy_tree(copy)
        _check_copy_is_imported(copy)
        for m in chosen:
            if (copy / m.path).read_text().count(m.old) != 1:
                print(f"mutations: {m.name}: its text is not found exactly once in {m.path}",
                      file=sys.stderr)
                return 2
        all_tests = tuple(sorted({t for m in chosen for t in m.tests}))
        green, seconds = _run_tests(copy, all_tests)
        print(f"baseline (unmutated) {'green' if green else 'RED'} in {seconds:.0f} s: "
              + " ".join(all_tests), flush=True)
        if not green:
            return 2
        survivors = []
        for m in chosen:
            target = copy / m.path
            original = target.read_text()
            target.write_text(original.replace(m.old, m.new))
            try:
                green, seconds = _run_tests(copy, m.tests)
            finally:
                target.write_text(original)
            verdict = "SURVIVED" if green else "killed"
            if green:
                survivors.append(m)
            print(f"{verdict:8} {m.name:32} {seconds:5.0f} s  {m.why}", flush=True)
        print(f"{len(chosen) - len(survivors)} of {len(chosen)} mutations killed")
        return 1 if survivors else 0


if __name__ == "__main__":
    raise SystemExit(main())
