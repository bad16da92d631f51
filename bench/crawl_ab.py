"""Whole crawls of two source trees side by side: CPU per page, before against after.

On this shared machine a crawl's CPU per page moves by ±30 % with the other jobs' load,
and crawls run one after the other meet different loads. Here both trees crawl at the
same time, each its own copy of the same web (same generator and seed, two ports, two
nginx instances), so both see the same load; the copies swap trees every round. Both
trees run from the same venv with ``PYTHONPATH`` set to their ``src/`` (extract one
with ``git archive <ref> src | tar -x -C DIR``).

    .venv/bin/python bench/crawl_ab.py --before-src /tmp/before/src [--after-src src] \\
        [--hosts 600 --pages 15 --page-bytes 80000 --links 100 --rounds 4 --delay 0]
    .venv/bin/python bench/crawl_ab.py --before-src /tmp/before/src --web realistic \\
        --hosts 150 --pages 10 --rounds 3          # issue 35's small crawl

``--web static`` (the default) is ``static_web.py``; ``--web realistic`` is
``realistic_web.py`` (robots.txt 404/500, Crawl-delay, sitemaps, duplicates), judged
with each host's own rules as ``crawl_vs_scrapy.py`` does.

Per round and tree it prints CPU per page (user + sys of the crawler from ``wait4``,
pages = distinct pages served with 200, from nginx's log), the politeness violations
in that log (``access_log.py``) and the load, and the CPU by phase of the crawl, on
nginx's clock against the crawler's process group sampled every 0.25 s: **start** (the
process's start to the first request), **bulk** (to the end of the request by which 90 %
of the crawl's requests were over), **tail** (to the last page response) and **end**
(to the process's exit: lingering for retries, the final flushes). At the end it prints
the median of after ÷ before.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import access_log  # noqa: E402
import realistic_web  # noqa: E402
import static_web  # noqa: E402
from crawl_vs_scrapy import courtier_cmd, courtier_ready  # noqa: E402
from nginx_local import LocalNginx, ensure_nginx, free_port  # noqa: E402
from report import cpu_between, run_measured  # noqa: E402

Web = static_web.SiteManifest | realistic_web.RealisticManifest
BULK_SHARE = 0.9


def phases(samples: list[tuple[float, float]], entries: list[access_log.LogEntry],
           last_page_end: float | None, total_cpu: float) -> dict[str, float]:
    """CPU seconds of the crawl's phases (see the module's docstring); NaN where the
    samples or the log do not cover a phase's ends."""
    nan = float("nan")
    if not samples or not entries or last_page_end is None:
        return dict.fromkeys(("start", "bulk", "tail", "end", "bulk_s", "tail_s"), nan)

    def between(t0: float, t1: float) -> float:
        cpu = cpu_between(samples, t0, t1)
        return nan if cpu is None else cpu

    ends = sorted(e.end for e in entries)
    first = min(e.start for e in entries)
    bulk_end = min(ends[int(BULK_SHARE * (len(ends) - 1))], last_page_end)
    start = samples[0][1] + between(samples[0][0], first)
    bulk = between(first, bulk_end)
    tail = between(bulk_end, last_page_end)
    return {"start": start, "bulk": bulk, "tail": tail,
            "end": total_cpu - start - bulk - tail,
            "bulk_s": bulk_end - first, "tail_s": last_page_end - bulk_end}


def crawl(src: Path, web: Web, work: Path, a: argparse.Namespace,
          help_text: str) -> dict[str, float]:
    """One crawl of ``web`` by the tree ``src``: its figures."""
    root = Path(web.root)
    seeds = static_web.write_seeds(web, root / "seeds.txt")
    hosts = static_web.write_hosts_file(web, root / "hosts.txt")
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    cmd = ["env", f"PYTHONPATH={src}",
           *courtier_cmd(a, data, seeds, hosts, 2 * web.total_pages + len(web.hosts),
                         help_text)]
    log = work / "access.log"
    log.unlink(missing_ok=True)
    load = os.getloadavg()[0]
    samples: list[tuple[float, float]] = []
    with LocalNginx(root, work / "nginx", web.port, log):
        code, timed_out, wall, usage = run_measured(cmd, work, work / "crawl.log",
                                                    a.max_seconds + 60, samples)
    entries = access_log.read_log(log)
    realistic = isinstance(web, realistic_web.RealisticManifest)
    pol = access_log.check_politeness(
        entries, a.delay, 0.01, web.disallowed,
        web.host_rules(a.delay) if isinstance(web, realistic_web.RealisticManifest) else None)
    cov = access_log.check_coverage(entries, web.pages,
                                    realistic_web.resource_of if realistic else None)
    cpu = usage.ru_utime + usage.ru_stime
    return {"exit": code, "timed_out": timed_out, "wall": wall, "cpu": cpu,
            "pages": cov.distinct, "ms_per_page": 1000 * cpu / max(1, cov.distinct),
            "violations": pol.total, "load": load, "requests": len(entries),
            **phases(samples, entries, cov.last_page_end, cpu)}


def make_webs(work: Path, a: argparse.Namespace) -> list[Web]:
    """Two copies of the web, each on its own free port."""
    if a.web == "realistic":
        return [realistic_web.generate(work / f"web{i}", a.hosts, a.pages, free_port(), a.seed)
                for i in range(2)]
    return [static_web.generate(work / f"web{i}", a.hosts, a.pages, free_port(), a.seed,
                                a.page_bytes, a.links) for i in range(2)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--before-src", type=Path, required=True)
    ap.add_argument("--web", choices=("static", "realistic"), default="static")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--after-src", type=Path, default=HERE.parent / "src")
    ap.add_argument("--hosts", type=int, default=600)
    ap.add_argument("--pages", type=int, default=15)
    ap.add_argument("--page-bytes", type=int, default=80_000)
    ap.add_argument("--links", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--max-seconds", type=float, default=900)
    ap.add_argument("--courtier-arg", action="append")
    a = ap.parse_args()
    ensure_nginx()
    ready, help_text = courtier_ready()
    if not ready:
        raise SystemExit(f"courtier CLI not usable:\n{help_text}")
    trees = {"before": a.before_src.resolve(), "after": a.after_src.resolve()}
    with tempfile.TemporaryDirectory(prefix="courtier-ab-") as tmp:
        work = Path(tmp)
        webs = make_webs(work, a)
        what = ("the realistic web" if a.web == "realistic" else
                f"pages of ~{a.page_bytes // 1000} KB with ~{a.links} links")
        print(f"{a.hosts} hosts x {a.pages} pages, {what}, delay {a.delay:g}, "
              f"{a.rounds} rounds, both trees at once", flush=True)
        ratios: list[float] = []
        for r in range(a.rounds):
            pairing = list(zip(trees, webs if r % 2 == 0 else webs[::-1], strict=True))
            results: dict[str, dict[str, float]] = {}

            def run(name: str, web: Web, out: dict[str, dict[str, float]]
                    = results) -> None:
                out[name] = crawl(trees[name], web, work / f"run-{name}", a, help_text)

            threads = [threading.Thread(target=run, args=(name, web)) for name, web in pairing]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for name in trees:
                f = results[name]
                print(f"  round {r + 1} {name:6s} {f['ms_per_page']:.3f} ms/page "
                      f"({f['pages']:.0f} pages, {f['cpu']:.1f} CPU-s, wall {f['wall']:.0f} s, "
                      f"exit {f['exit']:.0f}, violations {f['violations']:.0f}, "
                      f"load {f['load']:.1f})", flush=True)
                print(f"      CPU-s by phase: start {f['start']:.2f}, bulk {f['bulk']:.2f} "
                      f"({f['bulk_s']:.0f} s), tail {f['tail']:.2f} ({f['tail_s']:.0f} s), "
                      f"end {f['end']:.2f}; {f['requests']:.0f} requests", flush=True)
            ratio = results["after"]["ms_per_page"] / results["before"]["ms_per_page"]
            ratios.append(ratio)
            print(f"  round {r + 1} after / before = {ratio:.3f}", flush=True)
        print(f"median after / before = {statistics.median(ratios):.3f} "
              f"(rounds: {', '.join(f'{x:.3f}' for x in ratios)})")


if __name__ == "__main__":
    main()
