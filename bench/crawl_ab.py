"""Whole crawls of two source trees side by side: CPU per page, before against after.

On this shared machine a crawl's CPU per page moves by ±30 % with the other jobs' load,
and crawls run one after the other meet different loads. Here both trees crawl at the
same time, each its own copy of the same static web (same generator and seed, two
ports, two nginx instances), so both see the same load; the copies swap trees every
round. Both trees run from the same venv with ``PYTHONPATH`` set to their ``src/``
(extract one with ``git archive <ref> src | tar -x -C DIR``).

    .venv/bin/python bench/crawl_ab.py --before-src /tmp/before/src [--after-src src] \\
        [--hosts 600 --pages 15 --page-bytes 80000 --links 100 --rounds 4 --delay 0]

Per round and tree it prints CPU per page (user + sys of the crawler from ``wait4``,
pages = distinct pages served with 200, from nginx's log), the politeness violations
in that log (``access_log.py``) and the load; at the end the median of after ÷ before.
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
import static_web  # noqa: E402
from crawl_vs_scrapy import courtier_cmd, courtier_ready  # noqa: E402
from nginx_local import LocalNginx, ensure_nginx, free_port  # noqa: E402
from report import run_measured  # noqa: E402


def crawl(src: Path, web: static_web.SiteManifest, work: Path, a: argparse.Namespace,
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
    with LocalNginx(root, work / "nginx", web.port, log):
        code, timed_out, wall, usage = run_measured(cmd, work, work / "crawl.log",
                                                    a.max_seconds + 60)
    entries = access_log.read_log(log)
    pol = access_log.check_politeness(entries, a.delay, 0.01, web.disallowed)
    cov = access_log.check_coverage(entries, web.pages)
    cpu = usage.ru_utime + usage.ru_stime
    return {"exit": code, "timed_out": timed_out, "wall": wall, "cpu": cpu,
            "pages": cov.distinct, "ms_per_page": 1000 * cpu / max(1, cov.distinct),
            "violations": pol.total, "load": load}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--before-src", type=Path, required=True)
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
        webs = [static_web.generate(work / f"web{i}", a.hosts, a.pages, free_port(), 1,
                                    a.page_bytes, a.links) for i in range(2)]
        print(f"{a.hosts} hosts x {a.pages} pages of ~{a.page_bytes // 1000} KB with "
              f"~{a.links} links, delay {a.delay:g}, {a.rounds} rounds, both trees at once",
              flush=True)
        ratios: list[float] = []
        for r in range(a.rounds):
            pairing = list(zip(trees, webs if r % 2 == 0 else webs[::-1], strict=True))
            results: dict[str, dict[str, float]] = {}

            def run(name: str, web: static_web.SiteManifest, out: dict[str, dict[str, float]]
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
            ratio = results["after"]["ms_per_page"] / results["before"]["ms_per_page"]
            ratios.append(ratio)
            print(f"  round {r + 1} after / before = {ratio:.3f}", flush=True)
        print(f"median after / before = {statistics.median(ratios):.3f} "
              f"(rounds: {', '.join(f'{x:.3f}' for x in ratios)})")


if __name__ == "__main__":
    main()
