"""``seed add``, ``url``, ``domain stats``, ``stats`` and ``cluster``: the same answers from the
store of a crawl (``--data``) or from a running crawl's admin API (``--api HOST:PORT`` or a URL).

Both paths go through the API's own code: ``--data`` builds a store-only
control in this process and runs the same operation in-process
(:func:`courtier.api.routes.invoke`: no server, no socket), so the JSON
printed is identical either way.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from courtier.cli.call import add_api_flags, add_store_flag, call
from courtier.core.errors import ConfigError, InvalidURL

# aiohttp, the API and the URL code load inside the functions that use them,
# so that ``courtier --help`` and argument errors answer at once.


def add_query_commands(sub: Any) -> None:
    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--data", type=Path, default=Path("crawl-data"),
                            help="the crawl's --data directory (used when --api is not given)")
        add_store_flag(parser)
        add_api_flags(parser)

    seed = sub.add_parser("seed", help="add seeds to a crawl")
    seed_sub = seed.add_subparsers(dest="action", required=True)
    add = seed_sub.add_parser("add", help="add seed URLs (each checked on its own)")
    add.add_argument("urls", nargs="*")
    add.add_argument("--file", type=Path, help="file of seed URLs: whitespace or commas "
                                               "between them, # comments (README)")
    add.add_argument("--priority", type=int,
                     help="rank of these seeds, 0-99 (default 20: ahead of links and of "
                          "seeds given at start)")
    add.add_argument("--value", type=float,
                     help="value of these URLs for the refresh planner (default: derived "
                          "from depth and --priority; see docs/freshness.md)")
    add.add_argument("--json", action="store_true",
                     help="print the API's JSON answer (a result per URL) instead of one "
                          "summary line")
    common(add)
    url = sub.add_parser("url", help="a URL's state: fetches, schedule, digest, WARC location; "
                                     "or 'url import-values FILE' (url<TAB>value lines)")
    url.add_argument("url", help="a URL, or import-values")
    url.add_argument("file", nargs="?", type=Path, help="import-values: the file")
    common(url)
    domain = sub.add_parser("domain", help="per-domain figures")
    domain_sub = domain.add_subparsers(dest="action", required=True)
    stats = domain_sub.add_parser("stats", help="fetched, errors, robots and back-off state")
    stats.add_argument("domain")
    common(stats)
    crawl_stats = sub.add_parser("stats", help="crawl-wide figures")
    common(crawl_stats)
    cluster = sub.add_parser("cluster", help="workers sharing the crawl: shards, epochs, lease "
                                             "ages, handovers")
    cluster.add_argument("--json", action="store_true", help="print the JSON answer")
    cluster.add_argument("--worker-ttl", type=float, default=30.0,
                         help="a worker is live while its heartbeat is younger (30 s: the "
                              "default --lease-ttl)")
    common(cluster)


def _request(args: argparse.Namespace) -> tuple[str, str, Any]:
    """(method, path, JSON body) of the API call that answers this command."""
    if args.command == "seed":
        from courtier.crawl.intake import read_seed_lines

        urls = list(args.urls)
        if args.file is not None:
            from courtier.core.urls import canonicalize
            from courtier.crawl.intake import SeedProblem

            try:
                lines = read_seed_lines(args.file)
            except OSError as exc:
                raise ConfigError(f"--file {args.file}: {exc.strerror}") from None
            problems: list[SeedProblem] = []
            for number, text in lines:  # what is not a URL is named by file and line
                try:
                    canonicalize(text)
                except InvalidURL as exc:
                    problems.append(SeedProblem(str(args.file), number, text, str(exc)))
                else:
                    urls.append(text)
            if problems and not urls:
                shown = "; ".join(str(problem) for problem in problems[:3])
                more = f"; … and {len(problems) - 3} more" if len(problems) > 3 else ""
                raise ConfigError(f"--file {args.file}: no valid seed: {shown}{more}")
            for problem in problems:
                print(f"courtier: skipped seed {problem}", file=sys.stderr)
        if not urls:
            raise ConfigError("seed add: give URLs or --file")
        body: dict[str, Any] = {"urls": urls, "extend_scope": True}
        if args.priority is not None:
            body["priority"] = args.priority
        if args.value is not None:
            body["value"] = args.value
        return "POST", "/v1/seeds", body
    if args.command == "url":
        from courtier.core.urls import canonicalize

        try:
            key = canonicalize(args.url).url_key.hex()
        except InvalidURL as exc:
            raise ConfigError(f"not a crawlable URL: {args.url!r} ({exc})") from None
        return "GET", f"/v1/urls/{key}", None
    if args.command == "domain":
        return "GET", f"/v1/domains/{quote(args.domain, safe=':')}/stats", None
    if args.command == "cluster":
        return "GET", f"/v1/cluster?worker_ttl={args.worker_ttl}", None
    return "GET", "/v1/stats", None


def run_query(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Print the answer as JSON; exit 0 on 2xx, 1 on a 4xx/5xx answer (printed too)."""
    import asyncio

    stream = out or sys.stdout
    if args.command == "url" and args.url == "import-values":
        from courtier.cli.values import import_values

        status, answer = asyncio.run(import_values(args))
    else:
        if args.command == "url" and args.file is not None:
            raise ConfigError("url: one URL expected (or: url import-values FILE)")
        method, path, body = _request(args)
        status, answer = asyncio.run(call(args, method, path, body))
        if args.command == "cluster" and not args.json and status == 200:
            from courtier.cluster.report import render_text

            stream.write(render_text(answer))
            return 0
        if args.command == "seed" and not args.json and status == 200:
            for item in answer["results"]:
                if item["result"] == "rejected":
                    print(f"courtier: rejected seed {item['url']!r}: {item['reason']}",
                          file=sys.stderr)
            stream.write(seed_summary(answer) + "\n")
            return 0
    stream.write(json.dumps(answer, indent=2, sort_keys=True) + "\n")
    return 0 if 200 <= status < 300 else 1


def seed_summary(answer: dict[str, Any]) -> str:
    """The one line ``seed add`` prints: how many seeds were added, already known, refused
    (each refused one is also named on stderr)."""
    return (f"courtier: {answer['accepted']} seeds added, {answer['duplicate']} already "
            f"known, {answer['rejected']} rejected")
