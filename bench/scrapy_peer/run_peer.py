"""Run the Scrapy peer with the benchmark's politeness settings.

Usage (from ``bench/``, inside the peer venv)::

    .peer-venv/bin/python -m scrapy_peer.run_peer --seeds-file S --delay 0.5 \
        --concurrency 64 --max-pages N --max-seconds T --stats-out stats.json

Settings mirror courtier's flags: robots.txt obeyed, one request in flight per
host, the same fixed delay between request starts of a host (no jitter), no
AutoThrottle, the same total concurrency. The rest follows Scrapy's own
"broad crawls" advice (INFO logging, cookies and retries off, the
downloader-aware priority queue, which is already the default since 2.13).
The final stats are written as JSON for a cross-check against the access log.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from scrapy.crawler import CrawlerProcess

from scrapy_peer.spider import BenchSpider


def settings_for(args: argparse.Namespace) -> dict[str, Any]:
    """Scrapy settings for one benchmark run."""
    return {
        "BOT_NAME": "scrapy-peer-bench",
        "USER_AGENT": args.user_agent,
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS": args.concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "CONCURRENT_REQUESTS_PER_IP": 0,
        "DOWNLOAD_DELAY": args.delay,
        # Scrapy >= 2.14 spelling of RANDOMIZE_DOWNLOAD_DELAY = False
        "DOWNLOAD_DELAY_JITTER": 0.0,
        "AUTOTHROTTLE_ENABLED": False,
        "TWISTED_DNS_RESOLVER": "scrapy_peer.resolver.BenchResolver",
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
        "CLOSESPIDER_PAGECOUNT": args.max_pages,
        "CLOSESPIDER_TIMEOUT": args.max_seconds,
        "DOWNLOAD_TIMEOUT": 30,
        "RETRY_ENABLED": False,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
        "LOG_LEVEL": "INFO",
    }


def main(argv: list[str] | None = None) -> int:
    """Parse flags, crawl, write stats; exit code 0 when the crawl closed normally."""
    ap = argparse.ArgumentParser(description="Scrapy peer for the courtier benchmark")
    ap.add_argument("--seeds-file", required=True)
    ap.add_argument("--delay", type=float, default=0.5)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--max-pages", type=int, default=0)
    ap.add_argument("--max-seconds", type=float, default=0)
    ap.add_argument("--user-agent", default="scrapy-peer-bench/1.0")
    ap.add_argument("--stats-out", default="")
    args = ap.parse_args(argv)
    process = CrawlerProcess(settings_for(args), install_root_handler=True)
    crawler = process.create_crawler(BenchSpider)
    process.crawl(crawler, seeds_file=args.seeds_file)
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats else {}
    if args.stats_out:
        with open(args.stats_out, "w", encoding="utf-8") as fh:
            json.dump(stats, fh, default=str, indent=1, sort_keys=True)
    reason = stats.get("finish_reason", "")
    return 0 if reason in ("finished", "closespider_pagecount", "closespider_timeout") else 1


if __name__ == "__main__":
    raise SystemExit(main())
