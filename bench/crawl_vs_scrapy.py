"""Side-by-side crawl benchmark: courtier vs Scrapy on the same local test web.

One command (from the repository root)::

    .venv/bin/python bench/crawl_vs_scrapy.py          # realistic web, 1,000 x 20, delays 0, 0.5
    .venv/bin/python bench/crawl_vs_scrapy.py --small  # realistic web, 150 hosts x 10 pages
    .venv/bin/python bench/crawl_vs_scrapy.py --web static          # the easy web of static_web.py
    .venv/bin/python bench/crawl_vs_scrapy.py --web static --quick  # 200 x 30, delay 0.5 s
    .venv/bin/python bench/crawl_vs_scrapy.py --smoke  # 10 hosts x 10 pages, quick check

What happens:

1. nginx is found (or installed with apt-get), the Scrapy peer venv
   ``bench/.peer-venv`` is created with ``pip install scrapy`` if missing;
2. the web is generated in a temp dir (``realistic_web.py`` by default, or the
   easy ``static_web.py``), with seeds and an /etc/hosts-style file mapping every
   ``*.bench.test`` name to 127.0.0.1;
3. each crawler runs against a fresh nginx instance on 127.0.0.1 with its own
   access log, under the same politeness (robots.txt obeyed, 1 request in
   flight per host, a fixed delay between request starts of a host) and the
   same total concurrency; its CPU (user+sys) and peak RSS come from
   ``os.wait4`` on the crawler's process (children it waited for included),
   with a hard timeout that kills its process group; the process group's CPU is
   also sampled from /proc while it runs, which gives the CPU spent inside the
   crawl window (first request to last response, from nginx's log);
4. coverage and politeness are counted from nginx's access log
   (``access_log.py``), never from the crawlers' own reports: on the realistic
   web each host is held to its own robots.txt answer (404: all allowed, 500:
   nothing allowed) and to max(delay, its Crawl-delay), and a page fetched under
   two spellings (query order, tracking parameters) counts once.

Scrapy does not read Crawl-delay and reads a 500 robots.txt as "allow all"; the
peer is given both rules explicitly (``scrapy_peer/run_peer.py``), so both
crawlers are held to, and judged by, the same politeness.

It prints one table and the line ``courtier CPU/page ÷ Scrapy CPU/page = X``;
the figures are also saved as JSON under ``bench/out/``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import access_log
import realistic_web
import record_figures
import static_web
import web_tls
from nginx_local import LocalNginx, TlsFiles, ensure_nginx, free_port
from report import (
    TARGET_RATIO,
    RunResult,
    cpu_between,
    cpu_ratio,
    ratio_line,
    run_measured,
    table,
)

BENCH = Path(__file__).resolve().parent
#: issue 35: ≤ 0.30 of Scrapy's CPU per page on a small crawl (150 × 10), ≤ 0.20 otherwise
SMALL_CRAWL, SMALL_TARGET = 1_500, 0.30
PEER_VENV = BENCH / ".peer-venv"
PEER_PY = PEER_VENV / "bin" / "python"


def ensure_peer_venv(spec: str) -> None:
    """Create bench/.peer-venv with Scrapy unless it already imports scrapy."""
    if PEER_PY.exists():
        ok = subprocess.run([str(PEER_PY), "-c", "import scrapy"], capture_output=True)
        if ok.returncode == 0:
            return
    print(f"creating {PEER_VENV} with pip install {spec} …", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(PEER_VENV)], check=True)
    subprocess.run([str(PEER_PY), "-m", "pip", "install", "-q", spec], check=True, timeout=900)


def courtier_binary() -> Path:
    """The project venv's ``courtier`` entry point (beside this interpreter)."""
    return Path(sys.executable).with_name("courtier")


def courtier_package_dir() -> Path:
    """The folder of the ``courtier`` package this interpreter imports (not imported)."""
    spec = importlib.util.find_spec("courtier")
    if spec is None or spec.origin is None:
        raise SystemExit("the courtier package is not importable from this interpreter")
    return Path(spec.origin).parent


def courtier_ready() -> tuple[bool, str]:
    """Whether ``courtier crawl --help`` works, and its help text (or the error)."""
    exe = courtier_binary()
    if not exe.exists():
        return False, f"{exe} not found"
    # Bytecode for courtier's own modules, as `pip install` writes it for Scrapy's (and
    # for a non-editable courtier) at install time: with PYTHONDONTWRITEBYTECODE set, an
    # editable checkout would otherwise compile every module again at every start.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(courtier_package_dir())],
                   check=True, capture_output=True, timeout=300)
    done = subprocess.run([str(exe), "crawl", "--help"], capture_output=True, text=True, timeout=60)
    return done.returncode == 0, done.stdout if done.returncode == 0 else done.stderr[-800:]


def courtier_cmd(
    a: argparse.Namespace, data: Path, seeds: Path, hosts: Path, max_pages: int, help_text: str
) -> list[str]:
    """The courtier command line with the benchmark's politeness settings."""
    cmd = [
        str(courtier_binary()),
        "crawl",
        "--data",
        str(data),
        "--seeds-file",
        str(seeds),
        "--resolve",
        str(hosts),
        "--allow-network",
        "127.0.0.0/8",
        "--delay",
        str(a.delay),
        "--max-in-flight-per-host",
        "1",
        "--scope",
        "seeds-hosts",
        "--max-pages",
        str(max_pages),
        "--max-seconds",
        str(a.max_seconds),
        "--user-agent",
        "courtier-bench/1.0",
    ]
    if "--concurrency" in help_text:
        cmd += ["--concurrency", str(a.concurrency)]
    if "--max-in-flight-per-ip" in help_text:
        # Every test host is on 127.0.0.1; like Scrapy's CONCURRENT_REQUESTS_PER_IP = 0,
        # only the per-host limit applies (the per-IP cap is for real shared hosting).
        cmd += ["--max-in-flight-per-ip", "0"]
    if "--progress" in help_text:
        cmd += ["--progress", "none"]
    return cmd + list(a.courtier_arg or [])


def scrapy_cmd(a: argparse.Namespace, seeds: Path, max_pages: int, stats: Path,
               slot_delays: Path | None = None, ca_file: Path | None = None) -> list[str]:
    """The Scrapy peer command line with the same politeness settings (``slot_delays``:
    the web's Crawl-delays as JSON, host → seconds; ``ca_file``: the CA to trust) and,
    unless ``--peer-downloads all``, the HTML-only policy (``scrapy_peer/html_only.py``)."""
    extra = ["--slot-delays", str(slot_delays)] if slot_delays else []
    extra += ["--ca-file", str(ca_file)] if ca_file else []
    extra += ["--html-only"] if a.peer_downloads == "html" else []
    return [
        str(PEER_PY),
        "-m",
        "scrapy_peer.run_peer",
        "--seeds-file",
        str(seeds),
        "--delay",
        str(a.delay),
        "--concurrency",
        str(a.concurrency),
        "--max-pages",
        str(max_pages),
        "--max-seconds",
        str(a.max_seconds),
        "--stats-out",
        str(stats),
        *extra,
    ]


def profiled(cmd: list[str], out: Path, rate: int, gil: bool = False) -> list[str]:
    """``cmd`` under py-spy (raw collapsed stacks, idle frames left out) writing to ``out``;
    with ``gil`` only the thread holding the GIL is sampled (``profile_stages.py``)."""
    spy = Path(sys.executable).with_name("py-spy")
    if not spy.exists():
        raise SystemExit(f"--profile-courtier needs {spy}: .venv/bin/pip install py-spy")
    # --subprocesses: `crawl --workers N` runs its workers as child processes
    return [str(spy), "record", "--format", "raw", "--rate", str(rate), "--subprocesses",
            "--output", str(out), *(["--gil"] if gil else []), "--", *cmd]


def measure(
    name: str,
    cmd: list[str],
    cwd: Path,
    a: argparse.Namespace,
    manifest: static_web.SiteManifest | realistic_web.RealisticManifest,
    work: Path,
    out: Path,
    tls: TlsFiles | None = None,
) -> RunResult:
    """Serve the web with a fresh nginx (over HTTPS with ``tls``), run one crawler, judge
    it from the access log."""
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    log = work / f"access-{name}.log"
    print(f"[{name}] {' '.join(cmd)}", flush=True)
    load_before = os.getloadavg()[0]
    with LocalNginx(
        Path(manifest.root), work / f"nginx-{name}", manifest.port, log, workers=a.nginx_workers,
        tls=tls,
    ):
        samples: list[tuple[float, float]] = []
        code, timed_out, wall, ru = run_measured(
            cmd, cwd, out / f"{name}.log", a.max_seconds + a.grace, samples
        )
    entries = access_log.read_log(log)
    shutil.copy(log, out / log.name)
    # (epoch s, CPU s) of the crawler's process group: CPU over any part of the crawl
    (out / f"{name}-cpu-samples.json").write_text(json.dumps(samples), encoding="utf-8")
    realistic = isinstance(manifest, realistic_web.RealisticManifest)
    pol, cov = realistic_web.judge(entries, manifest, a.delay, a.tolerance)
    # the crawl window: the first request to the last page response (nginx's clock)
    window = (cov.first_start, cov.last_page_end)
    active = window[1] - window[0] if window[0] and window[1] else 0.0
    window_cpu = cpu_between(samples, window[0], window[1]) if active else None
    statuses = Counter(e.status for e in entries)
    sitemaps = sum(1 for e in entries if "sitemap" in e.uri)
    traffic = access_log.check_traffic(
        entries, manifest.non_html_of if realistic else access_log.non_html_by_suffix)
    res = RunResult(
        name=name,
        exit_code=code,
        timed_out=timed_out,
        wall_s=wall,
        cpu_user_s=ru.ru_utime,
        cpu_sys_s=ru.ru_stime,
        max_rss_mb=ru.ru_maxrss / 1024,
        pages=cov.distinct,
        existing=cov.existing,
        coverage=cov.coverage,
        refetches=cov.refetches,
        robots_requests=cov.robots_requests,
        other_requests=cov.other_requests,
        active_s=active,
        violations=pol.total,
        concurrency_violations=pol.concurrency,
        gap_violations=pol.gap,
        robots_order_violations=pol.robots_order,
        disallowed_fetches=pol.disallowed,
        min_gap_s=pol.min_gap,
        examples=pol.examples,
        load_before=load_before,
        load_after=os.getloadavg()[0],
        delay=a.delay,
        page_requests=cov.page_requests,
        window_cpu_s=window_cpu,
        connections_per_host=traffic.handshakes_line(),
        connections=traffic.handshakes_total,
        non_html_requests=traffic.non_html_requests,
        non_html_bytes=traffic.non_html_bytes,
        non_html_full_bytes=traffic.non_html_full_bytes,
        non_html_by_category=traffic.non_html_by_category,
    )
    print(
        f"[{name}] exit {code}{' (killed at hard timeout)' if timed_out else ''}, "
        f"{res.pages} pages in {wall:.1f} s; responses by status "
        f"{dict(sorted(statuses.items()))}, {sitemaps} sitemap requests",
        flush=True,
    )
    print(
        f"[{name}] {'TLS handshakes' if tls else 'connections'} (nginx's $connection "
        f"per host): {traffic.handshakes_line()}; non-HTML files: "
        f"{traffic.non_html_line()}",
        flush=True,
    )
    return res


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="courtier vs Scrapy on a local nginx test web")
    ap.add_argument("--web", choices=("realistic", "static"), default="realistic",
                    help="realistic_web.py (default) or the easy static_web.py")
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--pages", type=int, default=20, help="pages per host, home page included")
    ap.add_argument("--page-bytes", type=int, default=30_000, help="static web only")
    ap.add_argument("--links", type=int, default=50, help="links per page (static web only)")
    ap.add_argument("--delay", type=float, action="append", dest="delays",
                    help="per-host delay, both crawlers (repeatable: one pair of runs per "
                         "delay; default 0 and 0.5)")
    ap.add_argument("--concurrency", type=int, default=64, help="total requests in flight")
    ap.add_argument("--max-seconds", type=float, default=600, help="each crawler's own limit")
    ap.add_argument("--grace", type=float, default=60, help="hard kill this long after it")
    ap.add_argument("--tolerance", type=float, default=0.01, help="timing slack of the checks")
    ap.add_argument("--only", choices=("both", "courtier", "scrapy"), default="both")
    ap.add_argument("--nginx-workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scrapy-spec", default="scrapy", help="pip spec for the peer venv")
    ap.add_argument("--courtier-arg", action="append", help="extra courtier flag (repeatable)")
    ap.add_argument("--peer-downloads", choices=("html", "all"), default="html",
                    help="html (default): Scrapy skips links by IGNORED_EXTENSIONS and stops "
                         "a non-HTML response after its headers or first bytes, as a Scrapy "
                         "user asking for HTML only would; all: Scrapy as it comes")
    ap.add_argument("--out", type=Path, default=BENCH / "out")
    ap.add_argument("--figures-out", type=Path, nargs="?", const=record_figures.SHIPPED,
                    help="write courtier's per-core figures for `courtier plan` here "
                         "(no value: the copy shipped in the package)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (web, logs, data)")
    ap.add_argument("--web-dir", type=Path,
                    help="generate the realistic web here and keep it; a later run with the "
                         "same sizes, seed and scheme reuses it (and its port)")
    ap.add_argument("--profile-courtier", action="store_true",
                    help="run courtier under py-spy (raw stacks saved beside the results; "
                         "its CPU figures then include the sampler's)")
    ap.add_argument("--profile-rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument("--profile-gil", action="store_true",
                    help="sample only the thread holding the GIL (py-spy --gil): the samples "
                         "then add up to the CPU of Python code, not to threads' waits")
    ap.add_argument("--quick", action="store_true",
                    help="the earlier default: 200 hosts x 30 pages, delay 0.5 s")
    ap.add_argument("--small", action="store_true", help="150 hosts x 10 pages")
    ap.add_argument("--https", action="store_true",
                    help="serve the realistic web over HTTPS (a CA made at run time, given "
                         "to both crawlers)")
    ap.add_argument("--smoke", action="store_true", help="10 hosts x 10 pages, delay 0.2 s")
    a = ap.parse_args(argv)
    if (a.https or a.web_dir) and a.web != "realistic":
        ap.error("--https and --web-dir are for the realistic web only")
    if a.small:
        a.hosts, a.pages = 150, 10
    if a.smoke:
        a.hosts, a.pages, a.delays, a.max_seconds = 10, 10, [0.2], 120
    elif a.quick:
        a.hosts, a.pages = 200, 30
        a.delays = a.delays or [0.5]
    a.delays = a.delays or [0.0, 0.5]
    a.delay = a.delays[0]
    return a


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 0 when every selected crawler ran (whatever its figures)."""
    a = parse_args(argv)
    ensure_nginx()
    names = ["courtier", "scrapy"] if a.only == "both" else [a.only]
    help_text = ""
    if "courtier" in names:
        ready, help_text = courtier_ready()
        if not ready:
            print(f"courtier CLI not usable, skipping it:\n{help_text}", file=sys.stderr)
            names.remove("courtier")
    if "scrapy" in names:
        ensure_peer_venv(a.scrapy_spec)
    if not names:
        return 1
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = (a.out / stamp).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="courtier-bench-"))
    try:
        port = free_port()
        t0 = time.monotonic()
        manifest: static_web.SiteManifest | realistic_web.RealisticManifest
        slot_delays: Path | None = None
        tls: TlsFiles | None = None
        ca_file: Path | None = None
        if a.https:
            ca_file, tls = web_tls.issue_web_certificate(work / "tls")
            a.courtier_arg = [*(a.courtier_arg or []), "--ca-file", str(ca_file)]
        if a.web == "realistic":
            manifest = realistic_web.reuse_or_generate(
                a.web_dir or work / "www", a.hosts, a.pages, port, a.seed,
                "https" if a.https else "http")
            port = manifest.port
            slot_delays = work / "crawl-delays.json"
            slot_delays.write_text(json.dumps(manifest.crawl_delays()), encoding="utf-8")
        else:
            manifest = static_web.generate(
                work / "www", a.hosts, a.pages, port, a.seed, a.page_bytes, a.links
            )
        seeds = static_web.write_seeds(manifest, work / "seeds.txt")
        hosts = static_web.write_hosts_file(manifest, work / "hosts.txt")
        print(
            f"{a.web} web: {a.hosts} hosts x {a.pages} pages = {manifest.total_pages} pages "
            f"on 127.0.0.1:{port} (ready in {time.monotonic() - t0:.1f} s)",
            flush=True,
        )
        if isinstance(manifest, realistic_web.RealisticManifest):
            files = [f for fs in manifest.reachable_files().values() for f in fs.values()]
            kinds = Counter(f.category for f in files)
            print(f"  and {len(files)} linked non-HTML files a polite crawl can reach "
                  f"({', '.join(f'{c} {n}' for c, n in sorted(kinds.items()))}), "
                  f"{sum(f.bytes for f in files):,} bytes in all; Scrapy's downloads: "
                  f"{a.peer_downloads}", flush=True)
        max_pages = 2 * manifest.total_pages + a.hosts
        results: dict[float, list[RunResult]] = {}
        for delay in a.delays:
            a.delay = delay
            tag = f"d{delay:g}"
            runs = results.setdefault(delay, [])
            for name in names:
                if name == "courtier":
                    cmd = courtier_cmd(a, work / f"courtier-data-{tag}", seeds, hosts,
                                       max_pages, help_text)
                    if a.profile_courtier:
                        cmd = profiled(cmd, out / f"courtier-{tag}.pyspy.txt", a.profile_rate,
                                       a.profile_gil)
                    runs.append(measure(name, cmd, BENCH, a, manifest, work / tag, out / tag,
                                        tls))
                    if a.figures_out is not None:
                        figures = record_figures.figures_from_run(
                            runs[-1], work / f"courtier-data-{tag}", vars(a),
                            "bench/crawl_vs_scrapy.py " + " ".join(sys.argv[1:] if argv is None
                                                                   else argv))
                        record_figures.write_figures(figures, a.figures_out)
                else:
                    cmd = scrapy_cmd(a, seeds, max_pages, out / f"scrapy-stats-{tag}.json",
                                     slot_delays, ca_file)
                    runs.append(measure(name, cmd, BENCH, a, manifest, work / tag, out / tag,
                                        tls))
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    summary: dict[str, object] = {"args": {k: str(v) for k, v in vars(a).items()}, "runs": []}
    for delay, runs in results.items():
        text = table(runs)
        ratio = ratio_line(runs, SMALL_TARGET if a.hosts * a.pages <= SMALL_CRAWL
                           else TARGET_RATIO)
        print()
        print(
            f"{a.web} web{' over HTTPS' if a.https else ''}, delay {delay} s, "
            f"1 in flight per host, concurrency {a.concurrency}, "
            f"{a.hosts} hosts x {a.pages} pages, {os.cpu_count()} CPUs; "
            "violations = concurrency/gap/robots-order/disallowed, from nginx's log; "
            "dup fetches = pages served again ÷ page responses"
        )
        print(text)
        if ratio:
            print(ratio)
        for r in runs:
            for ex in r.examples[:5]:
                print(f"  {r.name} violation: {ex}")
        summary["runs"].append({  # type: ignore[attr-defined]
            "delay": delay,
            "results": [asdict(r) | {"cpu_per_1k": r.cpu_per_1k, "pages_per_s": r.pages_per_s,
                                     "window_pages_per_s": r.window_pages_per_s,
                                     "duplicate_rate": r.duplicate_rate} for r in runs],
            "ratio": cpu_ratio(runs),
            "window_ratio": cpu_ratio(runs, window=True),
            "table": text,
        })
    (out / "results.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    print(f"saved {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
