"""The ``courtier`` command line.

Exit codes: 0 finished normally (limits reached count as normal), 2 usage or
configuration error (the message names the flag, file or line), 1 anything else.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from courtier.cli_admin import add_admin_commands, run_admin
from courtier.cli_query import add_query_commands, run_query
from courtier.config import SCOPES, CrawlConfig, build_config
from courtier.errors import ConfigError, CourtierError
from courtier.progress import summary_line
from courtier.store.open import STORE_HELP, is_shared, store_url

if TYPE_CHECKING:
    from courtier.intake import SeedProblem

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
DEFAULT_WORKER_API = "127.0.0.1:8790"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors exit 2 with the flag named
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"courtier: error: {message}\n")


def add_crawl_flags(p: argparse.ArgumentParser) -> None:
    """Flags shared by `crawl` (and `demo` where they make sense). Unset = None."""
    p.add_argument("seeds", nargs="*", help="seed URLs")
    p.add_argument("--seeds-file", type=Path, help="file with one URL per line (# comments)")
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
    p.add_argument("--scope", choices=SCOPES, help="which hosts to follow (seeds-hosts)")
    p.add_argument("--include", action="append", help="regex a URL must match (repeatable)")
    p.add_argument("--exclude", action="append", help="regex that rejects a URL (repeatable)")
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
    p.add_argument("--api", help="serve the admin API and dashboard on HOST:PORT "
                                 "(loopback unless --api-token is set)")
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
    p.add_argument("--lease-ttl", type=float,
                   help="seconds a shard lease lasts without renewal (PostgreSQL store; 30)")
    p.add_argument("--worker-id", help="this worker's id in the cluster (DATA/worker-id)")
    p.add_argument("--worker-weight", type=float,
                   help="this worker's share of the shards relative to the others (1)")
    p.add_argument("--expect-workers", type=int,
                   help="live workers to wait for (at most one lease TTL) before taking "
                        "shards, so workers started together need no first handover (1)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")


class _VersionAction(argparse.Action):
    """``--version``: argparse's own action needs the version when the parser is built,
    which made every command read the package metadata (~25 ms); this reads it only when
    asked."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS,
                 help: str = "show the program's version number and exit") -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0,
                         help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from courtier import __version__

        print(f"courtier {__version__}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="courtier", description="A polite, large-scale web crawler.")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    crawl = sub.add_parser("crawl", help="crawl from seeds; resumes on the same --data")
    add_crawl_flags(crawl)
    crawl.add_argument("--workers", type=int,
                       help="worker processes on this machine, one per core "
                            "(needs a PostgreSQL --store; 1)")
    crawl.add_argument("--join", action="store_true", default=None,
                       help="join the live workers of a shared --store (else a crawl that "
                            "finds any refuses to start; `courtier worker` always joins)")
    worker = sub.add_parser(
        "worker", help="long-running service: crawl continuously (recrawls included) and "
                       "always serve the admin API (default 127.0.0.1:8790)")
    add_crawl_flags(worker)
    demo = sub.add_parser("demo", help="crawl a built-in multi-host test web on loopback")
    demo.add_argument("--data", type=Path, help="where to put the demo crawl (a temp dir)")
    demo.add_argument("--hosts", type=int, default=6, help="virtual hosts (6)")
    demo.add_argument("--pages", type=int, default=12, help="pages per host (12)")
    demo.add_argument("--delay", type=float, default=0.2, help="per-host delay (0.2)")
    demo.add_argument("--progress", choices=("auto", "bar", "log", "none"), default="auto")
    add_admin_commands(sub)
    add_query_commands(sub)
    from courtier.ops.commands import add_ops_commands

    add_ops_commands(sub)
    return parser


def config_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The crawl flags of ``args`` as build_config takes them (unset: None or ())."""
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "config", "verbose")}
    flags["seeds"] = tuple(args.seeds or ())
    for name in ("include", "exclude", "allow_network", "allowed_ports", "api_allowed_hosts",
                 "traps", "tiers"):
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


def _print_problem(problem: SeedProblem) -> None:
    print(f"courtier: skipped seed {problem}", file=sys.stderr)


def cmd_crawl(args: argparse.Namespace) -> int:
    from courtier.app import run

    if args.command == "worker":
        args.continuous = True
        args.join = True  # a service joins whatever cluster runs on its store
    config = config_from_args(args)
    if args.command == "worker":
        config = worker_defaults(config)
    resuming = is_shared(store_url(config.store)) or (config.data / "courtier.db").exists()
    if args.command == "worker":
        pass  # a service may start empty: seeds arrive through the API
    elif not config.seeds and config.seeds_file is None and not resuming:
        raise ConfigError("no seeds: give seed URLs, --seeds-file, or --data of an earlier crawl")
    if config.workers > 1:
        from courtier.cluster.local import run_local_cluster

        status = run_local_cluster(config, _print_problem)
    else:
        status = run(config, config.progress, _print_problem)
    print(summary_line(status))
    print(f"courtier: data in {config.data} (WARC files under "
          f"{config.archive or config.data / 'warc'})")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from courtier.demo import run_demo

    return run_demo(args.data, args.hosts, args.pages, args.delay, args.progress)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if getattr(args, "verbose", False) else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command in ("crawl", "worker"):
            return cmd_crawl(args)
        if args.command == "demo":
            return cmd_demo(args)
        if args.command in ("policy", "events", "export", "reparse", "archive"):
            return run_admin(args)
        if args.command in ("seed", "url", "domain", "stats", "cluster"):
            return run_query(args)
        if args.command in ("plan", "config"):
            from courtier.ops.commands import run_ops

            return run_ops(args)
    except ConfigError as exc:
        print(f"courtier: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CourtierError as exc:
        print(f"courtier: failed: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("courtier: interrupted", file=sys.stderr)
        return EXIT_FAILURE
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
