"""Administrative commands that talk to the store of a crawl directly (``--data``):
``policy``, ``events``, ``export``.

They are safe to run while a crawl is running on the same ``--data``: SQLite
serialises the writes, and the crawl applies policy changes within a second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

from courtier.errors import ConfigError, InvalidURL
from courtier.store.base import Store
from courtier.store.sqlite import SqliteStore
from courtier.urls import canonicalize, shard_of


def add_admin_commands(sub: Any) -> None:
    """Register the admin subcommands on the top-level subparsers."""
    policy = sub.add_parser("policy", help="per-host politeness overrides")
    actions = policy.add_subparsers(dest="action", required=True)
    pset = actions.add_parser("set", help="override delay, in-flight cap, daily pages, block")
    pset.add_argument("host", help="host name (both http and https) or scheme://host[:port]")
    pset.add_argument("--delay", type=float, help="seconds between request starts")
    pset.add_argument("--max-in-flight", type=int, help="concurrent requests")
    pset.add_argument("--max-pages-per-day", type=int, help="page fetches per 24 h")
    pset.add_argument("--block", action="store_true", help="fetch nothing from this host")
    for name, text in (("get", "show the override in force"), ("clear", "back to defaults")):
        parser = actions.add_parser(name, help=text)
        parser.add_argument("host")
    for parser in actions.choices.values():
        parser.add_argument("--data", type=Path, default=Path("crawl-data"),
                            help="the crawl's --data directory")
    events = sub.add_parser("events", help="the outbox of fetch results, as JSON lines")
    events.add_argument("--data", type=Path, default=Path("crawl-data"))
    events.add_argument("--after", type=int, default=0, help="cursor: last event id seen")
    events.add_argument("--limit", type=int, default=1000)
    events.add_argument("--follow", action="store_true", help="keep waiting for new events")
    events.add_argument("--max-seconds", type=float, help="stop following after this long")
    export = sub.add_parser("export", help="export crawl records as JSON lines")
    export.add_argument("what", choices=("audit",),
                        help="audit: one line per fetch with robots.txt version and delay applied")
    export.add_argument("--data", type=Path, default=Path("crawl-data"))


def host_keys_of(host: str) -> list[str]:
    """A bare host names both its http and https origins; a URL names one."""
    text = host if "://" in host else f"http://{host}/"
    try:
        url = canonicalize(text)
    except InvalidURL as exc:
        raise ConfigError(f"not a host name or URL: {host!r} ({exc})") from None
    if "://" in host:
        return [url.host_key]
    return [url.host_key, canonicalize(f"https://{host}/").host_key]


async def _with_store(data: Path, job: Callable[[Store], Awaitable[int]]) -> int:
    db = data / "courtier.db"
    if not db.exists():
        raise ConfigError(f"--data {data}: no crawl database here ({db} does not exist)")
    store = SqliteStore(db)
    await store.open()
    try:
        return await job(store)
    finally:
        await store.close()


async def _policy(args: argparse.Namespace, store: Store, out: TextIO) -> int:
    for key in host_keys_of(args.host):
        if args.action == "set":
            await store.set_policy(key, shard_of(key), args.delay, args.max_in_flight,
                                   args.max_pages_per_day, bool(args.block))
        elif args.action == "clear":
            await store.set_policy(key, shard_of(key), None, None, None, False)
        record = await store.load_host(key)
        policy = {
            "host": key,
            "delay": record.policy_delay if record else None,
            "max_in_flight": record.policy_max_in_flight if record else None,
            "max_pages_per_day": record.policy_max_pages if record else None,
            "blocked": bool(record.blocked) if record else False,
            "robots_crawl_delay": record.crawl_delay if record else None,
        }
        out.write(json.dumps(policy) + "\n")
    return 0


async def _events(args: argparse.Namespace, store: Store, out: TextIO) -> int:
    cursor, loop = args.after, asyncio.get_running_loop()
    deadline = None if args.max_seconds is None else loop.time() + args.max_seconds
    while True:
        batch = await store.read_events(cursor, args.limit)
        for event in batch:
            out.write(json.dumps({"id": event.id, "created_at": event.created_at,
                                  **event.payload}, sort_keys=True) + "\n")
            cursor = event.id
        out.flush()
        if not args.follow or (deadline is not None and loop.time() >= deadline):
            return 0
        if not batch:
            await asyncio.sleep(0.5)


async def _export_audit(store: Store, out: TextIO) -> int:
    cursor = 0
    while rows := await store.fetch_log(after=cursor, limit=5000):
        for row in rows:
            out.write(json.dumps(row, sort_keys=True) + "\n")
        cursor = rows[-1]["id"]
    return 0


def run_admin(args: argparse.Namespace, out: TextIO | None = None) -> int:
    stream = out or sys.stdout
    if args.command == "policy":
        return asyncio.run(_with_store(args.data, lambda s: _policy(args, s, stream)))
    if args.command == "events":
        return asyncio.run(_with_store(args.data, lambda s: _events(args, s, stream)))
    return asyncio.run(_with_store(args.data, lambda s: _export_audit(s, stream)))
