"""The per-page CPU work without the network, this tree against another, alternating.

A crawl's per-page figure on this shared machine moves by ±20 % from one run to
the next with the other jobs' load, more than most single changes save. This
script replays the CPU stages of a fetched page on the bench's own pages (parse
and link extraction, SimHash with the near-duplicate index, canonicalization of
every link, the payload lookup digest, the WARC request + response records) in
fresh interpreters, alternating the trees run by run, and prints the median
process CPU per page of each.

    git archive <ref> src | tar -x -C /tmp/before
    .venv/bin/python bench/page_pipeline_bench.py --before-src /tmp/before/src [--runs 7] \
        [--page-bytes 80000 --links 100]

Each page's parse is the one the crawl runs for its size: inline (text uncollapsed) up to
64 KB, above that the function the crawl's parse thread runs. Besides the totals it prints
the median ms per page of each stage in each tree.

It needs no server: the pages come from ``static_web.generate`` (same generator and
seed as ``crawl_vs_scrapy.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
HERE_SRC = HERE.parent / "src"

#: run in a fresh interpreter with PYTHONPATH set to the tree under test
CHILD = r"""
import json, sys, time
from pathlib import Path
from courtier.archive.warc import WarcWriter
from courtier.archive.warc_fields import sha256_digest
from courtier.dedup.pages import DuplicateTracker
from courtier.core.errors import InvalidURL
from courtier.fetch.transport import FetchResponse
from courtier.parse import offload
from courtier.parse.html import parse_html
from courtier.core.urls import canonicalize

pages, warc_dir, port = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
bodies = [(Path(p).read_bytes(), p.split("/")[-3], "/p/" + p.split("/")[-1]) for p in pages]
tracker = DuplicateTracker()
writer = WarcWriter(warc_dir)
headers = [("Content-Type", "text/html"), ("Server", "nginx"), ("Connection", "keep-alive")]
# what the crawl runs: small pages inline (text uncollapsed), larger ones by the function
# its OffLoopParser hands to a thread (older trees: offload._parse_page, text collapsed)
in_thread = getattr(offload, "parse_page_words", None) or offload._parse_page
prepared = time.process_time()
try:  # the compiled SimHash path loads at a crawl's start, not at its first page
    from courtier.dedup.simhash import prepare_compiled
    prepare_compiled()
except ImportError:  # a tree without it
    pass
clock = time.process_time
stages = dict.fromkeys(("placement", "digest", "warc", "parse", "simhash", "canonicalize"), 0.0)
start = clock()
prepare_s = start - prepared
for i, (body, host, path) in enumerate(bodies):
    url = f"http://{host}:{port}{path}"
    resp = FetchResponse(url=url, status=200, reason="OK", http_version="1.1",
                         headers=headers + [("Content-Length", str(len(body)))],
                         raw_body=body, body=body,
                         request_headers=[("User-Agent", "bench")], started_at=1e9 + i)
    t0 = clock()
    where = offload.html_placement(body)
    t1 = clock()
    sha256_digest(resp.raw_body)                      # the worker's payload lookup
    t2 = clock()
    writer.write_exchange(resp, warc_date=1e9 + i)    # request + response records
    t3 = clock()
    if where == "inline":
        page = parse_html(body, url, "text/html", None, agent_token="courtier",
                          want_text=True, collapse_text=False)
    else:
        page = in_thread(body, url, "text/html", None, "courtier")
    t4 = clock()
    tracker.fingerprint(i.to_bytes(16, "big"), page.text)
    t5 = clock()
    for link in page.links:
        try:
            canonicalize(link.url)
        except InvalidURL:
            pass
    t6 = clock()
    for name, a, b in (("placement", t0, t1), ("digest", t1, t2), ("warc", t2, t3),
                       ("parse", t3, t4), ("simhash", t4, t5), ("canonicalize", t5, t6)):
        stages[name] += b - a
cpu = clock() - start
writer.close()
print(json.dumps({"ms_per_page": 1000 * cpu / len(bodies), "prepare_s": prepare_s,
                  "stages": {k: 1000 * v / len(bodies) for k, v in stages.items()}}))
"""


def run_child(src: Path, pages: list[str], work: Path,
              port: int) -> tuple[float, float, dict[str, float]]:
    """CPU ms per page of one fresh interpreter, the CPU-s its start-up ``prepare``
    (the compiled SimHash path, where the tree has one) took before the timed part, and
    the ms per page of each stage."""
    warc = tempfile.mkdtemp(dir=work)
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(pages), warc, str(port)],
                         env=env, capture_output=True, text=True, check=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    return float(figures["ms_per_page"]), float(figures["prepare_s"]), figures["stages"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before-src", type=Path, help="another src/ tree to compare with")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--hosts", type=int, default=40)
    ap.add_argument("--pages", type=int, default=20)
    ap.add_argument("--page-bytes", type=int, default=30_000)
    ap.add_argument("--links", type=int, default=50)
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    import static_web

    trees = {"this tree": HERE_SRC}
    if args.before_src:
        trees = {"before": args.before_src, **trees}
    with tempfile.TemporaryDirectory(prefix="courtier-pipeline-") as tmp:
        work = Path(tmp)
        port = 8080
        static_web.generate(work / "www", args.hosts, args.pages, port, 1, args.page_bytes,
                            args.links)
        pages = sorted(str(p) for p in (work / "www").glob("*/p/*.html"))
        figures: dict[str, list[float]] = {name: [] for name in trees}
        prepare: dict[str, list[float]] = {name: [] for name in trees}
        stages: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
        for _ in range(args.runs):
            for name, src in trees.items():
                per_page, prepare_s, by_stage = run_child(src, pages, work, port)
                figures[name].append(per_page)
                prepare[name].append(prepare_s)
                for stage, ms in by_stage.items():
                    stages[name].setdefault(stage, []).append(ms)
    print(f"{len(pages)} pages of ~{args.page_bytes // 1000} KB with ~{args.links} links, "
          f"{args.runs} alternating runs, process CPU per page")
    for name, values in figures.items():
        print(f"  {name:10s} median {statistics.median(values):.3f} ms/page "
              f"(runs {', '.join(f'{v:.3f}' for v in values)}); "
              f"start-up prepare {statistics.median(prepare[name]):.3f} CPU-s")
    names = list(trees)
    print(f"  {'stage (median ms/page)':24s}" + "".join(f"{n:>12s}" for n in names)
          + ("  after / before" if len(names) == 2 else ""))
    for stage in stages[names[0]]:
        medians = [statistics.median(stages[n][stage]) for n in names]
        ratio = f"  {medians[1] / medians[0]:.3f}" if len(names) == 2 and medians[0] else ""
        print(f"  {stage:24s}" + "".join(f"{m:12.3f}" for m in medians) + ratio)
    if len(figures) == 2:
        before, after = (statistics.median(v) for v in figures.values())
        print(f"  after / before = {after / before:.3f}")


if __name__ == "__main__":
    main()
