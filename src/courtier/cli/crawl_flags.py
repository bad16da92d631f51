"""The crawl flags: the ``courtier crawl``/``worker`` options, and how the parsed flags
become a :class:`~courtier.core.config.CrawlConfig`.

Shared by the main parser (:mod:`courtier.cli.main`) and ``courtier config show``
(:mod:`courtier.cli.config_commands`), which takes the same flags; both import them from
here, so neither imports the other.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from courtier.core.config import SCOPES, CrawlConfig, build_config
from courtier.store.open import STORE_HELP

#: where ``courtier worker`` serves its admin API unless told otherwise
DEFAULT_WORKER_API = "127.0.0.1:8790"


def add_crawl_flags(p: argparse.ArgumentParser) -> None:
    """Flags shared by `crawl` (and `demo` where they make sense). Unset = None."""
    p.add_argument("seeds", nargs="*", help="seed URLs")
    p.add_argument("--seeds-file", type=Path,
                   help="file of seed URLs: whitespace or commas between them, # comments "
                        "(README, \"Seed files\")")
    p.add_argument("--data", type=Path, help="crawl home: database, WARC files (resumable)")
    p.add_argument("--store", help=STORE_HELP)
    p.add_argument("--config", type=Path, help="TOML file whose keys are these flags' names")
    p.add_argument("--delay", type=float, help="seconds between request starts per host (1.0)")
    p.add_argument("--max-in-flight-per-host", type=int, help="concurrent requests per host (1)")
    p.add_argument("--max-in-flight-per-ip", type=int,
                   help="concurrent requests to all hosts on one IP address (8; 0: no cap)")
    p.add_argument("--ip-delay", type=float,
                   help="seconds between request starts to one IP address (0)")
    p.add_argument("--concurrency", type=int, help="concurrent fetches in total (64)")
    p.add_argument("--known-urls-cap", type=int,
                   help="URL keys of held shards kept exactly in memory, ~19 bytes each "
                        "(20000000; past it a shard's links go to the Bloom filter and the "
                        "store; 0: none)")
    p.add_argument("--scope", choices=SCOPES, help="which hosts to follow (seeds-hosts)")
    p.add_argument("--include", action="append", help="regex a URL must match (repeatable)")
    p.add_argument("--exclude", action="append", help="regex that rejects a URL (repeatable)")
    p.add_argument("--strip-param", action="append", dest="strip_params", metavar="NAME",
                   help="remove this query parameter from URLs besides the tracking list "
                        "(utm_*, gclid, fbclid…; repeatable; NAME, NAME* or DOMAIN:NAME)")
    p.add_argument("--keep-param", action="append", dest="keep_params", metavar="NAME",
                   help="keep this tracking parameter after all (repeatable; NAME, NAME* "
                        "or DOMAIN:NAME)")
    p.add_argument("--max-depth", type=int, help="link hops from a seed")
    p.add_argument("--max-pages", type=int, help="stop after this many page fetches")
    p.add_argument("--max-seconds", type=float, help="stop after this many seconds")
    p.add_argument("--daily-budget", type=int,
                   help="page fetches per 24 h across all hosts (every outcome counts)")
    p.add_argument("--user-agent", help="User-Agent (its product token is matched by robots.txt)")
    p.add_argument("--resolve", type=Path, help="hosts file (IP name…) overriding DNS")
    p.add_argument("--allow-network", action="append",
                   help="CIDR the SSRF guard should allow (repeatable), e.g. 127.0.0.0/8")
    p.add_argument("--allowed-port", action="append", dest="allowed_ports",
                   help="fetch only from these TCP ports (repeatable; default: any)")
    p.add_argument("--ca-file", type=Path, metavar="PEM",
                   help="private CA certificate trusted for HTTPS besides the system store")
    p.add_argument("--accept-type", action="append", dest="accept_types", metavar="TYPE",
                   help="also read bodies of this media type (repeatable; e.g. "
                        "application/pdf or image/*); other non-HTML bodies are not downloaded")
    p.add_argument("--parse-timeout", type=float,
                   help="seconds to parse a page with very many tags (10; then kept without links)")
    p.add_argument("--low-speed-limit", type=int, metavar="BYTES",
                   help="abort a body slower than BYTES/s over --low-speed-time (1024; 0: off)")
    p.add_argument("--low-speed-time", type=float, metavar="SECONDS",
                   help="window of the low-speed limit (20)")
    p.add_argument("--header-timeout", type=float, metavar="SECONDS",
                   help="the status line and headers must be in this many seconds after a "
                        "fetch starts (30)")
    p.add_argument("--robots-expiry", type=float, help="seconds a robots.txt copy is used (86400)")
    p.add_argument("--recrawl-interval", type=float, help="seconds before a page is due again")
    p.add_argument("--tier", action="append", dest="tiers", metavar="SPEC",
                   help="a refresh tier 'NAME min=S max=S [start=S] [value=V] [url=REGEX]' "
                        "(repeatable; see docs/freshness.md)")
    p.add_argument("--tail-share", type=float,
                   help="share of --daily-budget the refresh planner keeps free for new and "
                        "long-overdue URLs (0.1)")
    p.add_argument("--change-distance", type=int,
                   help="count a page as changed only when its SimHash moved more than this "
                        "many bits (default: any change of its bytes)")
    p.add_argument("--probe-sitemap-xml", action="store_true", default=None,
                   help="also fetch /sitemap.xml of every host (Sitemap: lines in robots.txt "
                        "are always followed)")
    p.add_argument("--continuous", action="store_true", default=None,
                   help="keep running for recrawls instead of ending when nothing is due")
    p.add_argument("--linger", type=float,
                   help="seconds a one-shot crawl waits for retries and backed-off hosts "
                        "before ending (120); later ones are kept for the next run")
    p.add_argument("--progress", choices=("auto", "bar", "log", "none"),
                   help="progress display (auto: live line on a terminal, log lines otherwise)")
    p.add_argument("--log-format", choices=("text", "json"),
                   help="log lines on stderr: text (default) or json, one object per line "
                        "with stable keys (docs/operations.md)")
    p.add_argument("--archive", help="WARC root: a folder (default DATA/warc) or an fsspec "
                                     "URL such as s3://bucket/prefix (spooled, then uploaded)")
    p.add_argument("--archive-prefix", help="this worker's prefix in the object store "
                                            "(default: the host name)")
    p.add_argument("--archive-endpoint", help="S3 endpoint URL (or AWS_ENDPOINT_URL)")
    p.add_argument("--archive-region", help="S3 region (or AWS_DEFAULT_REGION)")
    p.add_argument("--archive-segment-bytes", type=int,
                   help="object-store segments rotate at this size (64 MiB)")
    p.add_argument("--archive-segment-age", type=float,
                   help="… or this many seconds after opening (60)")
    p.add_argument("--api", help="serve the admin API and dashboard on HOST:PORT or "
                                 "http://HOST:PORT (loopback unless --api-token is set)")
    p.add_argument("--api-token", help="bearer token the admin API requires "
                                       "(visible in ps: prefer COURTIER_API_TOKEN or "
                                       "--api-token-file)")
    p.add_argument("--api-token-file", type=Path, help="file holding the admin API's token")
    p.add_argument("--api-allowed-host", action="append", dest="api_allowed_hosts",
                   help="Host name the admin API answers besides loopback names "
                        "(repeatable; e.g. behind a reverse proxy)")
    p.add_argument("--trap", action="append", dest="traps", metavar="NAME=VALUE",
                   help="a trap threshold, e.g. max-path-depth=30 or template-max-growth=none "
                        "(repeatable; see docs/traps.md)")
    p.add_argument("--durability", choices=("normal", "full"),
                   help="SQLite commits: normal (default; the last commits may be lost on power "
                        "loss or an OS crash, never on a process crash) or full (fsync each)")
    p.add_argument("--events-retention", type=float, metavar="SECONDS",
                   help="remove outbox events older than this once every registered consumer "
                        "has read them (604800 = 7 days; 0: keep for ever)")
    p.add_argument("--audit-retention", type=float, metavar="SECONDS",
                   help="remove audit rows (courtier export audit) older than this "
                        "(7776000 = 90 days; 0: keep for ever)")
    p.add_argument("--lease-ttl", type=float,
                   help="seconds a shard lease lasts without renewal (PostgreSQL store; 30)")
    p.add_argument("--worker-id", help="this worker's id in the cluster (DATA/worker-id)")
    p.add_argument("--worker-weight", type=float,
                   help="this worker's share of the shards relative to the others (1)")
    p.add_argument("--expect-workers", type=int,
                   help="live workers to wait for (at most one lease TTL) before taking "
                        "shards, so workers started together need no first handover (1)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")


def config_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The crawl flags of ``args`` as build_config takes them (unset: None or ())."""
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "config", "verbose")}
    flags["seeds"] = tuple(args.seeds or ())
    for name in ("include", "exclude", "allow_network", "allowed_ports", "accept_types",
                 "api_allowed_hosts", "strip_params", "keep_params", "traps", "tiers"):
        flags[name] = tuple(flags.get(name) or ())
    return flags


def config_from_args(args: argparse.Namespace) -> CrawlConfig:
    return build_config(config_flags(args), args.config)


def worker_defaults(config: CrawlConfig) -> CrawlConfig:
    """`courtier worker` always serves the API: 127.0.0.1:8790 unless a flag, the
    environment or the file names another address."""
    if config.api is None:
        config = dataclasses.replace(config, api=DEFAULT_WORKER_API).validate()
    return config
