"""``courtier demo``: crawl a built-in multi-host test web on loopback, offline.

The test web and the crawler run in one process; the crawler reaches the
virtual hosts through a hosts file (``--resolve``) and an explicit
``--allow-network 127.0.0.0/8`` — exactly what a user would pass by hand.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from courtier.core.config import build_config
from courtier.crawl.app import crawl, data_dir_lock, run_async
from courtier.crawl.progress import Progress, summary_line
from courtier.testweb import TestWebServer, WebSpec, default_web, politeness_violations
from courtier.testweb.serve import broken_hosts_lines

#: the search the demo ends with: each host's about page and its mirror (a revisit)
DEMO_QUERY = "about"


async def _demo(data: Path, hosts: int, pages: int, delay: float, progress_mode: str) -> int:
    spec = default_web(n_hosts=hosts, pages_per_host=pages, crawl_delay=0.4)
    async with TestWebServer(spec) as server:
        web = server.web
        resolve = data / "demo-hosts.txt"
        resolve.write_text(web.hosts_file_text())
        config = build_config({
            "data": data, "seeds": tuple(web.seeds()), "resolve": resolve,
            "allow_network": ("127.0.0.0/8",), "delay": delay, "progress": progress_mode,
            "linger": 0.0,
        })
        progress = Progress(progress_mode)
        try:
            status = await crawl(config, progress, install_signals=False)
        finally:
            progress.close()
        expected = web.expected_fetches()
        fetched = server.fetched_urls()
        violations = politeness_violations(server.log, delay=delay, max_in_flight=1)
    print(summary_line(status))
    print(f"test web: {hosts} hosts on 127.0.0.1:{server.port}; "
          f"{len(fetched & expected)}/{len(expected)} expected URLs fetched; "
          f"politeness violations seen by the server: {len(violations)}")
    print(f"WARC files ({len(status.warc_files)}):")
    for path in status.warc_files:
        print(f"  {path}")
    print(f"database: {data / 'courtier.db'}")
    await _index_and_search(data)
    for line in demo_epilogue(spec):
        print(line)
    return 0 if not violations else 1


async def _index_and_search(data: Path) -> None:
    """The end of the feed: index the crawl's events (``courtier index``), run one search
    over it and print its hits and the commands to go on with."""
    from courtier.cli.index_commands import INDEX_NAME, index_crawl
    from courtier.consumer.index_db import SearchIndex
    from courtier.consumer.pages import archive_roots
    from courtier.consumer.search import render_text, search

    flags = argparse.Namespace(api=None, store=None, data=data, batch=200, follow=False)
    path = data / INDEX_NAME
    await index_crawl(flags, path, archive_roots(data), sys.stdout)
    index = SearchIndex.open(path, create=False)
    try:
        found = search(index, DEMO_QUERY, limit=4)
    finally:
        index.close()
    print(f"$ courtier search {DEMO_QUERY} --data {data}   ({found.total} pages match)")
    sys.stdout.write("".join(f"  {line}\n" for line in render_text(found).splitlines()))
    print(f"try: courtier search polite crawler --data {data}  "
          "(README: 'Feed a search index')")


def demo_epilogue(spec: WebSpec) -> list[str]:
    """The demo's last lines: the hosts broken on purpose, and what to try next."""
    return [
        *(f"broken on purpose: {line}" for line in broken_hosts_lines(spec)),
        "next:",
        "  courtier testweb serve        # this test web until Ctrl-C; prints its crawl command",
        "  that command with --workers 3 --store postgresql://…   # a 3-worker cluster "
        "(docs/scale-out.md)",
        "  that command with --api 127.0.0.1:8790   # the live dashboard at "
        "http://127.0.0.1:8790/ (docs/api.md)",
    ]


def run_demo(data: Path | None, hosts: int, pages: int, delay: float,
             progress_mode: str = "auto") -> int:
    if data is None:
        data = Path(tempfile.mkdtemp(prefix="courtier-demo-"))
    data.mkdir(parents=True, exist_ok=True)
    with data_dir_lock(data):
        try:
            return run_async(_demo(data, hosts, pages, delay, progress_mode))
        finally:
            sys.stdout.flush()
