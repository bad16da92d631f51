"""``courtier testweb serve``: the built-in multi-host test web on loopback until stopped
(:mod:`courtier.testweb.serve`). ``python -m courtier.testweb`` runs the same command."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_testweb_command(sub: Any) -> None:
    """Add ``testweb serve`` to the subparsers action ``sub``."""
    testweb = sub.add_parser("testweb", help="serve the built-in multi-host test web on "
                                             "loopback, to try courtier on")
    actions = testweb.add_subparsers(dest="testweb_command", required=True,
                                     parser_class=type(testweb))
    serve = actions.add_parser(
        "serve", help="serve until Ctrl-C/SIGTERM; writes a hosts file (for --resolve) and a "
                      "seeds file and prints the crawl commands that use them")
    add_serve_arguments(serve)


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--port", type=int, default=8080,
                       help="TCP port on 127.0.0.1 (8080; 0 takes any free port)")
    serve.add_argument("--hosts", type=int, default=12,
                       help="virtual hosts h00.courtier.test … (12)")
    serve.add_argument("--pages", type=int, default=30, help="pages per host (30)")
    serve.add_argument("--crawl-delay", type=float, default=2.0, metavar="SECONDS",
                       help="the Crawl-delay of the hosts that set one (2.0)")
    serve.add_argument("--dir", type=Path,
                       help="where to write hosts.txt and seeds.txt (a new temporary folder)")
    serve.add_argument("--access-log", type=Path, metavar="FILE",
                       help="append every request the test web answers to FILE, "
                            "one JSON object a line")


def run_testweb(args: argparse.Namespace) -> int:
    from courtier.core.errors import ConfigError
    from courtier.testweb.serve import run_serve
    from courtier.testweb.spec import default_web

    for flag, value in (("--hosts", args.hosts), ("--pages", args.pages)):
        if value < 1:
            raise ConfigError(f"{flag} {value}: must be at least 1")
    if args.crawl_delay < 0:
        raise ConfigError(f"--crawl-delay {args.crawl_delay}: must not be negative")
    spec = default_web(n_hosts=args.hosts, pages_per_host=args.pages,
                       crawl_delay=args.crawl_delay)
    return run_serve(spec, args.port, args.dir, args.access_log)
