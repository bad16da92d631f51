"""Administrative commands that talk to the store of a crawl directly (``--store``, or
the SQLite database under ``--data``):
``policy``, ``events``, ``export``.

They are safe to run while a crawl is running on the same ``--data``: SQLite
serialises the writes, and the crawl applies policy changes within a second.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import quote

from courtier.cli_query import add_api_flags, add_store_flag, call
from courtier.errors import ConfigError, InvalidURL
from courtier.store.open import open_store, store_url

if TYPE_CHECKING:  # the URL code loads only when a command runs
    from courtier.store.base import Store


def add_admin_commands(sub: Any) -> None:
    """Register the admin subcommands on the top-level subparsers."""
    policy = sub.add_parser("policy", help="per-host politeness overrides")
    actions = policy.add_subparsers(dest="action", required=True)
    pset = actions.add_parser("set", help="override delay, in-flight cap, daily pages, block")
    pset.add_argument("host", help="host name or host:port (both http and https), or a URL")
    pset.add_argument("--delay", type=float, help="seconds between request starts")
    pset.add_argument("--max-in-flight", type=int, help="concurrent requests")
    pset.add_argument("--max-pages-per-day", type=int, help="page fetches per 24 h")
    pset.add_argument("--block", action="store_true", help="fetch nothing from this host")
    for name, text in (("get", "show the override in force"), ("clear", "back to defaults")):
        parser = actions.add_parser(name, help=text)
        parser.add_argument("host")
    for parser in actions.choices.values():
        parser.add_argument("--data", type=Path, default=Path("crawl-data"),
                            help="the crawl's --data directory (used when --api is not given)")
        add_store_flag(parser)
        add_api_flags(parser)
    events = sub.add_parser("events", help="the outbox of fetch results, as JSON lines")
    events.add_argument("--data", type=Path, default=Path("crawl-data"))
    add_store_flag(events)
    events.add_argument("--after", type=int, default=0, help="cursor: last event id seen")
    events.add_argument("--limit", type=int, default=1000)
    events.add_argument("--follow", action="store_true", help="keep waiting for new events")
    events.add_argument("--max-seconds", type=float, help="stop following after this long")
    add_api_flags(events)
    export = sub.add_parser("export", help="export crawl records as JSON lines")
    export.add_argument("what", choices=("audit",),
                        help="audit: one line per fetch with robots.txt version and delay applied")
    export.add_argument("--data", type=Path, default=Path("crawl-data"))
    add_store_flag(export)


def domain_of(host: str) -> str:
    """The API's ``{domain}`` (host or host:port) of a host name or URL."""
    from courtier.urls import canonicalize

    text = host if "://" in host else f"http://{host}/"
    try:
        url = canonicalize(text)
    except InvalidURL as exc:
        raise ConfigError(f"not a host name or URL: {host!r} ({exc})") from None
    authority = url.host_key.split("://", 1)[1]
    return authority


async def _with_store(args: argparse.Namespace, job: Callable[[Store], Awaitable[int]]) -> int:
    store = await open_store(store_url(args.store), args.data, must_exist=True)
    try:
        return await job(store)
    finally:
        await store.close()


async def _policy(args: argparse.Namespace, out: TextIO) -> int:
    path = f"/v1/domains/{quote(domain_of(args.host), safe=':')}/policy"
    if args.action == "set":
        body = {"delay": args.delay, "max_in_flight": args.max_in_flight,
                "max_pages": args.max_pages_per_day, "blocked": bool(args.block)}
        status, answer = await call(args, "PUT", path, body)
    elif args.action == "clear":
        status, answer = await call(args, "DELETE", path)
    else:
        status, answer = await call(args, "GET", path)
    out.write(json.dumps(answer, sort_keys=True) + "\n")
    return 0 if 200 <= status < 300 else 1


async def _events(args: argparse.Namespace, out: TextIO) -> int:
    import asyncio

    cursor, loop = args.after, asyncio.get_running_loop()
    deadline = None if args.max_seconds is None else loop.time() + args.max_seconds
    while True:
        status, answer = await call(args, "GET",
                                    f"/v1/events?after={cursor}&limit={args.limit}")
        if not 200 <= status < 300:
            out.write(json.dumps(answer, sort_keys=True) + "\n")
            return 1
        for event in answer["events"]:
            out.write(json.dumps(event, sort_keys=True) + "\n")
        cursor = answer.get("next_after", cursor)
        out.flush()
        if not args.follow or (deadline is not None and loop.time() >= deadline):
            return 0
        if not answer["events"]:
            await asyncio.sleep(0.5)


async def _export_audit(store: Store, out: TextIO) -> int:
    cursor = 0
    while rows := await store.fetch_log(after=cursor, limit=5000):
        for row in rows:
            out.write(json.dumps(row, sort_keys=True) + "\n")
        cursor = rows[-1]["id"]
    return 0


def run_admin(args: argparse.Namespace, out: TextIO | None = None) -> int:
    import asyncio

    stream = out or sys.stdout
    if args.command == "policy":
        return asyncio.run(_policy(args, stream))
    if args.command == "events":
        return asyncio.run(_events(args, stream))
    return asyncio.run(_with_store(args, lambda s: _export_audit(s, stream)))
