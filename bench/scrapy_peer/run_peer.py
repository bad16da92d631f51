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

Two rules courtier follows by itself are given to Scrapy explicitly so both are
held to the same politeness: a robots.txt answering 5xx disallows everything
(``robots_status.UnreachableRobotsMiddleware``), and a host's ``Crawl-delay``
(Scrapy does not read it) comes from ``--slot-delays``, a JSON object host →
seconds written by the benchmark from the web's manifest, as ``DOWNLOAD_SLOTS``
with ``delay = max(--delay, Crawl-delay)`` and one request in flight.

With ``--html-only``, the peer follows the HTML-only policy a Scrapy user would write
(``html_only.py``: links dropped by ``LinkExtractor``'s ``IGNORED_EXTENSIONS``, other
non-HTML downloads stopped after the headers or the first bytes); without it, Scrapy
downloads every linked file in full (up to its 1 GB ``DOWNLOAD_MAXSIZE``).

With ``--ca-file`` (the web served over HTTPS), Scrapy verifies certificates
(``DOWNLOAD_VERIFY_CERTIFICATES``; it does not by default) against that CA alone:
Twisted's platform trust reads OpenSSL's default paths, which ``SSL_CERT_FILE``
points at the benchmark's CA, as courtier's ``--ca-file`` does.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from scrapy.crawler import CrawlerProcess

from scrapy_peer.spider import BenchSpider


def settings_for(args: argparse.Namespace) -> dict[str, Any]:
    """Scrapy settings for one benchmark run."""
    slot_delays: dict[str, float] = (
        json.loads(Path(args.slot_delays).read_text(encoding="utf-8")) if args.slot_delays
        else {})
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
        "DOWNLOAD_SLOTS": {host: {"delay": max(args.delay, d), "concurrency": 1, "jitter": 0.0}
                           for host, d in slot_delays.items()},
        "DOWNLOADER_MIDDLEWARES": {
            "scrapy_peer.robots_status.UnreachableRobotsMiddleware": 90,
        },
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
        "DOWNLOAD_VERIFY_CERTIFICATES": bool(args.ca_file),
        "EXTENSIONS": ({"scrapy_peer.html_only.HtmlOnlyDownloads": 0} if args.html_only
                       else {}),
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
    ap.add_argument("--slot-delays", default="", help="JSON file: host -> Crawl-delay seconds")
    ap.add_argument("--ca-file", default="", help="PEM of the CA to trust (and verify with)")
    ap.add_argument("--html-only", action="store_true",
                    help="the HTML-only policy of html_only.py (skip by extension, stop "
                         "non-HTML downloads early)")
    args = ap.parse_args(argv)
    if args.ca_file:
        os.environ["SSL_CERT_FILE"] = args.ca_file
    process = CrawlerProcess(settings_for(args), install_root_handler=True)
    crawler = process.create_crawler(BenchSpider)
    process.crawl(crawler, seeds_file=args.seeds_file, html_only=args.html_only)
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats else {}
    if args.stats_out:
        with open(args.stats_out, "w", encoding="utf-8") as fh:
            json.dump(stats, fh, default=str, indent=1, sort_keys=True)
    reason = stats.get("finish_reason", "")
    return 0 if reason in ("finished", "closespider_pagecount", "closespider_timeout") else 1


if __name__ == "__main__":
    raise SystemExit(main())
