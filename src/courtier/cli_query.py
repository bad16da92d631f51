"""``seed add``, ``url``, ``domain stats``, ``stats`` and ``cluster``: the same answers from the
store of a crawl (``--data``) or from a running crawl's admin API (``--api URL``).

Both paths go through the API's own code: ``--data`` builds a store-only
control in this process and runs the same operation in-process
(:func:`courtier.api.routes.invoke`: no server, no socket), so the JSON
printed is identical either way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from courtier.errors import ConfigError, CourtierError, InvalidURL
from courtier.store.open import STORE_HELP, open_store, store_url

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
    add.add_argument("--file", type=Path, help="one URL per line, # comments")
    add.add_argument("--priority", type=int,
                     help="rank of these seeds, 0-99 (default 20: ahead of links and of "
                          "seeds given at start)")
    add.add_argument("--value", type=float,
                     help="value of these URLs for the refresh planner (default: derived "
                          "from depth and --priority; see docs/freshness.md)")
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
        from courtier.intake import read_seed_lines

        urls = list(args.urls)
        if args.file is not None:
            try:
                urls += [text for _, text in read_seed_lines(args.file)]
            except OSError as exc:
                raise ConfigError(f"--file {args.file}: {exc.strerror}") from None
        if not urls:
            raise ConfigError("seed add: give URLs or --file")
        body: dict[str, Any] = {"urls": urls, "extend_scope": True}
        if args.priority is not None:
            body["priority"] = args.priority
        if args.value is not None:
            body["value"] = args.value
        return "POST", "/v1/seeds", body
    if args.command == "url":
        from courtier.urls import canonicalize

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


async def _call_api(base: str, token: str | None, method: str, path: str,
                    body: Any) -> tuple[int, Any]:
    import aiohttp

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = aiohttp.ClientTimeout(total=30)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, session.request(
            method, base.rstrip("/") + path, json=body, headers=headers) as resp:
            return resp.status, await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise CourtierError(f"--api {base}: {exc}") from None


async def _call_store(args: argparse.Namespace, method: str, path: str,
                      body: Any) -> tuple[int, Any]:
    """The API operation run in this process over the store (no server, no socket).

    ``stats`` is answered by the same code as the API's without loading the API
    views and the frontier (``api/crawl_figures.py``): most of a one-shot command's
    time is its start-up."""
    url = store_url(getattr(args, "store", None))
    store = await open_store(url, args.data, must_exist=True)
    try:
        if (method, path) == ("GET", "/v1/stats"):
            from courtier.api.crawl_figures import stats_answer
            from courtier.clock import RealClock
            from courtier.config import offline_config

            return await stats_answer(store, offline_config(), RealClock().now())
        from courtier.api.control import StoreOnlyControl
        from courtier.api.routes import invoke

        return await invoke(StoreOnlyControl(store), method, path, body)
    finally:
        await store.close()


async def call(args: argparse.Namespace, method: str, path: str,
               body: Any = None) -> tuple[int, Any]:
    """One admin API call, to ``--api`` when given, else in-process over the crawl's store
    (``--store``, or the SQLite database under ``--data``)."""
    if getattr(args, "api", None):
        token = args.api_token or os.environ.get("COURTIER_API_TOKEN")
        token_file = getattr(args, "api_token_file", None)
        if token_file is not None:
            from courtier.config import read_token_file

            token = read_token_file(token_file, "--api-token-file")
        return await _call_api(args.api, token, method, path, body)
    return await _call_store(args, method, path, body)


Caller = Callable[[str, str, Any], Awaitable[tuple[int, Any]]]


@asynccontextmanager
async def open_caller(args: argparse.Namespace) -> AsyncIterator[Caller]:
    """Like :func:`call` for many calls in a row (``events`` paging through the outbox):
    with ``--api`` each call is one HTTP request; else the store is opened once, here,
    and every call runs the API operation in-process over it."""
    if getattr(args, "api", None):
        async def over_api(method: str, path: str, body: Any) -> tuple[int, Any]:
            return await call(args, method, path, body)

        yield over_api
        return
    from courtier.api.control import StoreOnlyControl
    from courtier.api.routes import invoke

    store = await open_store(store_url(getattr(args, "store", None)), args.data,
                             must_exist=True)
    try:
        control = StoreOnlyControl(store)

        async def over_store(method: str, path: str, body: Any) -> tuple[int, Any]:
            return await invoke(control, method, path, body)

        yield over_store
    finally:
        await store.close()


def add_store_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", help=STORE_HELP)


def add_api_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api", help="a running crawl's admin API, e.g. http://127.0.0.1:8790")
    parser.add_argument("--api-token", help="bearer token (visible in ps: prefer "
                                            "COURTIER_API_TOKEN or --api-token-file)")
    parser.add_argument("--api-token-file", type=Path, help="file holding the bearer token")


def run_query(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Print the answer as JSON; exit 0 on 2xx, 1 on a 4xx/5xx answer (printed too)."""
    import asyncio

    stream = out or sys.stdout
    if args.command == "url" and args.url == "import-values":
        from courtier.cli_values import import_values

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
    stream.write(json.dumps(answer, indent=2, sort_keys=True) + "\n")
    return 0 if 200 <= status < 300 else 1
