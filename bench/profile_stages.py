"""Per-stage CPU breakdown of a py-spy profile of a crawl.

Reads py-spy's raw output (``py-spy record --format raw``: one collapsed stack
per line, innermost frame last, then the sample count), as written by
``crawl_vs_scrapy.py --profile-courtier``. Each sample is charged to the
*innermost* frame that belongs to a stage (a courtier module or a library);
frames of the generic standard library (``re``, ``json``, ``dataclasses``…)
are looked through to their caller. Start-up imports are a stage of their own.

    .venv/bin/python bench/profile_stages.py PROFILE.txt --pages 20000 [--cpu-s 96.1]

Record with ``py-spy record --gil`` (``crawl_vs_scrapy.py --profile-courtier
--profile-gil``): only the thread holding the GIL is sampled, so the samples add up
to the process's CPU. Without ``--gil``, py-spy also samples threads that wait for
the GIL or for a core (a parse thread between two C calls, the store's thread), which
on a busy machine inflates those stages (issue 35: the off-loop parse's ``ada``
call, 4 µs, showed as 5 % of the crawl). What runs with the GIL released (Lexbor's
parse, SHA-256, ISA-L's deflate, SQLite) is not in a ``--gil`` profile; ``perf
record`` sorted by shared object gives that part.

With ``--pages`` it prints ms of CPU per page for each stage; with ``--cpu-s``
(the run's measured CPU) the per-page figures are scaled to it instead of to
the sample count ÷ rate.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

#: (stage, pattern on "function (path:line)"), tried in order on each frame
RULES: list[tuple[str, re.Pattern[str]]] = [
    ("start-up (imports)", re.compile(r"\(<frozen importlib|\(importlib/")),
    ("dedup (Bloom, digest, SimHash)", re.compile(
        r"\((courtier/dedup/|numpy/|numba/|rbloom)|\b(sha256|payload_digest|digest_of)\b")),
    ("WARC writing + compression", re.compile(
        r"\((courtier/archive/|warcio/|fastwarc|isal/|gzip\.py|zlib)")),
    ("parse + link extraction", re.compile(r"\((courtier/parse/|selectolax/|html/)")),
    ("canonicalization + scope + traps", re.compile(
        r"\((courtier/(core/)?(urls|tracking|authority)\.py|courtier/(crawl/)?(intake|link_memo)"
        r"\.py|courtier/frontier/(traps|trap_rules|trap_state|templates)\.py|"
        r"ada_url/|publicsuffixlist/|urllib/|ipaddress\.py|encodings/idna)")),
    ("store (SQLite / PostgreSQL client)", re.compile(
        r"\((courtier/store/|sqlite3/|asyncpg/)")),
    ("politeness (robots, delays)", re.compile(r"\(courtier/politeness/")),
    ("frontier", re.compile(r"\((courtier/frontier/|heapq)")),
    ("HTTP client", re.compile(
        r"\((aiohttp/|courtier/fetch/|multidict/|yarl/|aiodns/|brotli|aiohappyeyeballs/|"
        r"propcache/|http/cookies|email/|ssl\.py)")),
    ("events (feed entries, JSON)", re.compile(
        r"\((courtier/events/|json/|courtier/core/records\.py)")),
    ("cluster (shards, gates)", re.compile(r"\(courtier/cluster/")),
    ("logging / progress / metrics / API", re.compile(
        r"\((logging/|courtier/(crawl/)?(progress|progress_text|metrics|status|loopwatch)\.py|"
        r"courtier/core/logs\.py|prometheus_client/|courtier/api/)")),
    ("worker + page pipeline glue", re.compile(
        r"\(courtier/(crawl/|core/|(worker|process|app|outcome)\.py)")),
    ("asyncio + event loop", re.compile(
        r"\((asyncio/|uvloop/|selectors\.py|concurrent/futures/|threading\.py|socket\.py|"
        r"multiprocessing/)")),
]
OTHER = "other"
#: a thread blocked here is waiting, not computing; py-spy still samples it as active. The
#: event loop's selector is the same kind of wait: py-spy counts the loop's thread active
#: while it is runnable, and on a loaded machine a thread woken from epoll waits there
#: for a core (10 % of the samples at load 24)
IDLE = "idle (thread-pool queue wait, selector wait; not CPU, left out)"
_IDLE_LEAF = re.compile(r"^(_worker \(concurrent/futures/thread\.py:81\)|"
                        r"Condition\.wait \(threading\.py|Queue\.get \(queue\.py|"
                        r"\w+Selector\.select \(selectors\.py)")


def stage_of(stack: list[str]) -> str:
    if _IDLE_LEAF.search(stack[-1]):
        return IDLE
    importing, rules = RULES[0]
    if any(rules.search(frame) for frame in stack):
        return importing
    for frame in reversed(stack):  # innermost first
        for stage, pattern in RULES:
            if pattern.search(frame):
                return stage
    return OTHER


def read_profile(path: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack_text, _, n = line.rpartition(" ")
        if not stack_text or not n.isdigit():
            continue
        counts[stage_of(stack_text.split(";"))] += int(n)
    return counts


def report(counts: Counter[str], pages: int | None, cpu_s: float | None, rate: int) -> str:
    idle = counts.pop(IDLE, 0)
    total = sum(counts.values())
    seconds = cpu_s if cpu_s is not None else total / rate
    lines = [f"{'stage':40} {'share':>7} {'ms/page':>8}", "-" * 57]
    for stage, n in counts.most_common():
        share = n / total if total else 0.0
        per_page = f"{share * seconds * 1000 / pages:8.3f}" if pages else "     n/a"
        lines.append(f"{stage:40} {share:7.1%} {per_page}")
    per = f", {seconds * 1000 / pages:.3f} ms/page" if pages else ""
    lines.append(f"{'total':40} {1:7.0%}  ({total} samples, {seconds:.1f} CPU-s{per})")
    lines.append(f"({idle} samples of {IDLE})")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", type=Path)
    ap.add_argument("--pages", type=int, help="pages fetched in the profiled run")
    ap.add_argument("--cpu-s", type=float, help="the run's measured CPU seconds")
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    a = ap.parse_args()
    print(report(read_profile(a.profile), a.pages, a.cpu_s, a.rate))


if __name__ == "__main__":
    main()
