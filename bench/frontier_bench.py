"""The frontier alone: lease grants per second on one core.

The frontier (``courtier.frontier.Frontier``) is driven as the worker drives
it: hosts registered, URL rows added in batches, robots.txt fetched once per
host (a real ``finish_robots`` with a small file), then a loop that takes
every lease that may start now, keeps up to ``--in-flight`` of them open and
finishes the oldest (``finish_page``), advancing a virtual clock only when
nothing may start. Only the frontier's own work is timed (``process_time``,
the bench's own bookkeeping included, so the figure is conservative). Each case
runs under the garbage-collector settings of a crawl (``app.crawl_gc``: start-up
objects frozen, thresholds ``GC_THRESHOLDS``), entered before the URLs are added
as a crawl enters it before its first refill.

    .venv/bin/python bench/frontier_bench.py                 # 10 k, 100 k, 1 M hosts
    .venv/bin/python bench/frontier_bench.py --queued 10000000   # the full 10 M URLs (≈ 6 GB)

Cases:

* ``hosts``: N active hosts sharing ``--queued`` URLs; delay 1 s per host; with
  ``--no-robots-hosts`` the same with every robots.txt answering 404 (many real hosts).
* ``hot``: one host with ``--hot-urls`` pending URLs among 1,000 others: its
  grants per second, the frontier's memory per queued URL, and its
  politeness (every start at least the delay after the previous fetch ended,
  checked on the virtual clock).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from collections import deque

from courtier.core.clock import VirtualClock
from courtier.core.urls import shard_of
from courtier.crawl.app import crawl_gc
from courtier.frontier import FetchFeedback, Frontier, Lease, LeaseKind
from courtier.politeness.delays import DelayPolicy
from courtier.store.base import DueUrl

ROBOTS = b"User-agent: *\nDisallow: /private/\n"
TARGET = 50_000


def host_name(i: int) -> str:
    return f"http://h{i:07d}.bench.test"


def make_frontier(clock: VirtualClock, delay: float) -> Frontier:
    policy = DelayPolicy(delay=delay, adaptive_factor=0.0)
    return Frontier(clock, "courtier", delay_policy=policy, max_in_flight_per_ip=0)


def feed(frontier: Frontier, hosts: list[str], per_host: list[int], batch: int = 5000) -> int:
    """Register the hosts and add their URL rows in store-sized batches."""
    now = frontier.clock.now()
    rows: list[DueUrl] = []
    added = 0
    for key, count in zip(hosts, per_host, strict=True):
        shard = shard_of(key)
        frontier.register_host(key, shard)
        for j in range(count):
            url = f"{key}/p/{j}.html"
            rows.append(DueUrl(url_key=added.to_bytes(16, "big"), url=url, host_key=key,
                               shard=shard, depth=1, priority=0, version=1, next_fetch_at=now))
            added += 1
            if len(rows) >= batch:
                frontier.add(rows)
                rows = []
    frontier.add(rows)
    return added


def fetch_all_robots(frontier: Frontier, clock: VirtualClock, status: int = 200) -> None:
    """Every host's first lease is its robots.txt: answer them all with ``status`` (200
    with a small file, or 404: no robots.txt, everything allowed), all at the same virtual
    instant, so no page lease is due yet: the delay runs from each answer."""
    while (lease := frontier.next_lease()) is not None:
        assert lease.kind is LeaseKind.ROBOTS, lease
        frontier.finish_robots(lease, status, ROBOTS if status == 200 else b"")


def grant_loop(frontier: Frontier, clock: VirtualClock, grants: int, in_flight: int,
               fetch_s: float, watch: str | None = None
               ) -> tuple[float, int, list[Lease], list[float]]:
    """Take up to ``grants`` page leases; return CPU seconds, leases granted, ``watch``'s
    leases and their finish times (virtual)."""
    ok = FetchFeedback(status=200, elapsed=fetch_s)
    open_leases: deque[Lease] = deque()
    watched: list[Lease] = []
    finished_at: list[float] = []
    granted = 0
    gc.collect()
    start = time.process_time()
    while granted < grants:
        lease = frontier.next_lease()
        if lease is not None:
            granted += 1
            open_leases.append(lease)
            if lease.host_key == watch:
                watched.append(lease)
            if len(open_leases) < in_flight:
                continue
        if open_leases:
            clock.advance(fetch_s / in_flight)
            done = open_leases.popleft()
            frontier.finish_page(done, ok)
            if done.host_key == watch:
                finished_at.append(clock.now())
            continue
        wake = frontier.next_wake_at()
        if wake is None:
            break
        clock.set(max(clock.now(), wake))
    return time.process_time() - start, granted, watched, finished_at


def hosts_case(n_hosts: int, queued: int, grants: int, delay: float,
               robots_status: int = 200) -> dict[str, float]:
    with crawl_gc():  # the collector settings a crawl runs with (app.py), set before its refills
        return _hosts_case(n_hosts, queued, grants, delay, robots_status)


def _hosts_case(n_hosts: int, queued: int, grants: int, delay: float,
                robots_status: int) -> dict[str, float]:
    clock = VirtualClock()
    frontier = make_frontier(clock, delay)
    hosts = [host_name(i) for i in range(n_hosts)]
    base, extra = divmod(queued, n_hosts)
    t0 = time.process_time()
    added = feed(frontier, hosts, [base + (1 if i < extra else 0) for i in range(n_hosts)])
    fetch_all_robots(frontier, clock, robots_status)
    setup = time.process_time() - t0
    cpu, granted, _, _ = grant_loop(frontier, clock, grants, in_flight=64, fetch_s=0.05)
    return {"hosts": n_hosts, "queued": added, "setup_s": setup, "grants": granted,
            "grants_per_s": granted / cpu}


def hot_case(hot_urls: int, others: int, grants: int, delay: float) -> dict[str, float]:
    with crawl_gc():
        return _hot_case(hot_urls, others, grants, delay)


def _hot_case(hot_urls: int, others: int, grants: int, delay: float) -> dict[str, float]:
    clock = VirtualClock()
    frontier = make_frontier(clock, delay)
    hot = host_name(9_999_999)
    hosts = [hot] + [host_name(i) for i in range(others)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    added = feed(frontier, hosts, [hot_urls] + [20] * others)
    fetch_all_robots(frontier, clock)
    memory = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    cpu, granted, watched, finished = grant_loop(frontier, clock, grants, in_flight=64,
                                                 fetch_s=0.05, watch=hot)
    # politeness of the hot host on the virtual clock: each start >= previous end + delay
    gaps = [b.issued_at - end for b, end in zip(watched[1:], finished, strict=False)]
    return {"hot_urls": hot_urls, "queued": added, "bytes_per_url": memory / added,
            "grants_per_s": granted / cpu, "hot_grants": len(watched),
            "min_gap_after_end_s": min(gaps) if gaps else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--queued", type=int, default=2_000_000,
                    help="URLs queued in memory across the hosts (the goal is 10 M: ≈ 6 GB)")
    ap.add_argument("--grants", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3, help="grant loops per case (median)")
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--hot-urls", type=int, nargs="*", default=[10_000, 1_000_000])
    ap.add_argument("--no-robots-hosts", type=int, nargs="*", default=[10_000],
                    help="host counts of the case where every robots.txt answers 404")
    a = ap.parse_args()
    print(f"frontier grants/s on one core (target ≥ {TARGET:,}), delay {a.delay} s, "
          f"64 leases open, median of {a.repeat}")
    cases = [(n, 200, "") for n in a.hosts] + [(n, 404, ", robots.txt 404")
                                               for n in a.no_robots_hosts]
    for n, status, label in cases:
        runs = [hosts_case(n, max(a.queued, n), a.grants, a.delay, status)
                for _ in range(a.repeat)]
        rate = statistics.median(r["grants_per_s"] for r in runs)
        r = runs[0]
        each = ", ".join(f"{x['grants_per_s']:,.0f}" for x in runs)
        print(f"  {n:>9,} hosts{label}, {int(r['queued']):>10,} queued: {rate:>9,.0f} grants/s "
              f"(runs {each}; "
              f"setup {r['setup_s']:.1f} CPU-s) {'ok' if rate >= TARGET else 'MISSES'}")
    for hot_urls in a.hot_urls:
        r = hot_case(hot_urls, 1_000, a.grants, a.delay)
        print(f"  hot host with {hot_urls:>9,} pending (+1,000 hosts x 20): "
              f"{r['grants_per_s']:>9,.0f} grants/s, {r['bytes_per_url']:.0f} B per queued URL, "
              f"hot host granted {int(r['hot_grants'])}, smallest start-after-end gap "
              f"{r['min_gap_after_end_s']:.3f} s (delay {a.delay})")


if __name__ == "__main__":
    main()
