"""Intake alone: links per second through canonicalize + scope + trap rules + Bloom
+ the batched SQLite insert, on one core.

The links are shaped like the large farm's pages (``static_web.py``): 50 links
a page, absolute as ``parse_html`` hands them over, of which about a fifth
repeat site navigation, a few carry fragments, query strings, upper-case
hosts, default ports or dot segments, 6 point at other hosts and 2 at
``*.invalid``. Each page's links go through ``Intake.links`` exactly as the
worker calls it (scope ``seeds-hosts`` with every host a seed, the template
tracker on), and every 200 pages the rows are inserted with the store's own
``insert_urls`` (one ``executemany`` in a transaction, as the commit path
does). ``process_time`` of the whole loop is the figure.

    .venv/bin/python bench/intake_bench.py [--pages 20000] [--hosts 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path

from courtier.core.clock import VirtualClock
from courtier.core.config import build_config
from courtier.core.urls import canonicalize
from courtier.crawl.intake import Intake, Scope
from courtier.frontier.traps import TemplateTracker, TrapRules
from courtier.store.sqlite import SqliteStore
from courtier.store.sqlite._queries import insert_urls
from courtier.store.sqlite._schema import connect

TARGET = 100_000
LINKS_PER_PAGE = 50


def page_links(rng: random.Random, host: int, hosts: int, pages: int) -> list[str]:
    base = f"http://h{host:04d}.bench.test"
    links = [f"{base}/", f"{base}/p/1.html", f"{base}/p/2.html", f"{base}/about.html"]
    links += [f"{base}/p/{rng.randrange(pages)}.html" for _ in range(30)]
    links += [f"{base}/p/{rng.randrange(pages)}.html#s{rng.randrange(9)}" for _ in range(3)]
    links += [f"{base}/p/{rng.randrange(pages)}.html?ref=nav&x={rng.randrange(99)}"
              for _ in range(2)]
    links += [f"HTTP://H{host:04d}.BENCH.TEST:80/p/../p/{rng.randrange(pages)}.html"]
    links += [f"http://h{rng.randrange(hosts):04d}.bench.test/p/{rng.randrange(pages)}.html"
              for _ in range(6)]
    links += [f"{base}/private/secret.html", f"http://x{rng.randrange(99)}.invalid/",
              f"http://y{rng.randrange(99)}.invalid/a", f"{base}/p/{host}/"]
    return links[:LINKS_PER_PAGE]


def run(pages: int, hosts: int, seed: int, db: Path) -> tuple[float, int, int]:
    rng = random.Random(seed)
    config = build_config({"seeds": (), "scope": "seeds-hosts"})
    seeds = [canonicalize(f"http://h{h:04d}.bench.test/") for h in range(hosts)]
    clock = VirtualClock()
    intake = Intake(Scope(config, seeds), traps=TemplateTracker(TrapRules(), clock))
    per_host = max(1, pages // hosts)
    corpus = [page_links(rng, p % hosts, hosts, per_host * 2) for p in range(pages)]
    conn = connect(str(db))  # the store's own PRAGMAs (WAL, page cache, checkpoints)
    links = inserted = 0
    pending = []
    start = time.process_time()
    for number, raws in enumerate(corpus, start=1):
        pending += intake.links(raws, 1, clock.now())
        links += len(raws)
        if number % 200 == 0 or number == len(corpus):
            conn.execute("BEGIN")
            inserted += insert_urls(conn, pending)
            conn.execute("COMMIT")
            intake.remember(u.url_key for u in pending)
            pending = []
            clock.advance(0.5)
    cpu = time.process_time() - start
    conn.close()
    return cpu, links, inserted


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=20_000)
    ap.add_argument("--hosts", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    rates = []
    for i in range(a.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "courtier.db"
            store = SqliteStore(db)  # the real schema and migrations
            asyncio.run(store.open())
            asyncio.run(store.close())
            cpu, links, inserted = run(a.pages, a.hosts, i, db)
        rates.append(links / cpu)
        print(f"  run {i + 1}: {links:,} links in {cpu:.2f} CPU-s = {links / cpu:,.0f} links/s, "
              f"{inserted:,} rows inserted")
    rate = statistics.median(rates)
    print(f"intake: median {rate:,.0f} links/s per core "
          f"({'meets' if rate >= TARGET else 'misses'} the target ≥ {TARGET:,})")


if __name__ == "__main__":
    main()
