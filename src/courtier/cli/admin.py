"""Administrative commands that talk to the store of a crawl directly (``--store``, or
the SQLite database under ``--data``):
``policy``, ``events``, ``export``.

They are safe to run while a crawl is running on the same ``--data``: SQLite
serialises the writes, and the crawl applies policy changes within a second.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import quote

from courtier.cli.call import (
    Caller,
    add_api_flags,
    add_store_flag,
    answer_error,
    call,
    check_consumer_name,
    page_reader,
)
from courtier.core.config import SCOPES
from courtier.core.errors import ConfigError, CourtierError, InvalidURL
from courtier.core.shard_cursor import ShardCursor
from courtier.store.open import open_store, store_url

if TYPE_CHECKING:  # the URL code loads only when a command runs
    from courtier.store.base import Store


ARCHIVE_HELP = ("WARC root, a folder or fsspec URL (default: the archive the crawl in --data "
                "wrote to)")


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
    pset.add_argument("--tier", help="refresh tier of the host's URLs (a configured --tier)")
    pset.add_argument("--min-interval", type=float, help="least seconds between refetches")
    pset.add_argument("--max-interval", type=float, help="most seconds between refetches")
    pset.add_argument("--value", type=float, help="factor on the derived value of its URLs")
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
    events.add_argument("--limit", type=int,
                        help="print at most this many events (default: every event up to "
                             "now; the command pages through the outbox 1,000 at a time)")
    events.add_argument("--follow", action="store_true",
                        help="keep waiting for new events (until --max-seconds or --limit)")
    events.add_argument("--max-seconds", type=float, help="stop following after this long")
    events.add_argument("--cursor-file", type=Path,
                        help="resumable cursor: read at start (wins over --after), rewritten "
                             "atomically after each batch is printed")
    events.add_argument("--consumer", metavar="NAME",
                        help="a cursor registered in the store under NAME: start after its "
                             "position (registered at 0 if new) and advance it after each "
                             "batch is printed (not with --api, --follow, --after or "
                             "--cursor-file)")
    events.add_argument("--by-shard", action="store_true",
                        help="with --consumer: register a new NAME with a per-shard cursor "
                             "(read like --cursor, no outbox sequencer); a NAME registered "
                             "so is read by shard with or without this flag")
    events.add_argument("--cursor", metavar="TOKEN", dest="shard_cursor",
                        help="a per-shard cursor token ('' for the first event): print the "
                             "events above it up to now, each shard's in commit order, then "
                             "the token to read on from on stderr (a line 'cursor TOKEN'); "
                             "no outbox sequencer runs (not with --after, --consumer, "
                             "--follow or --cursor-file)")
    events.add_argument("--consumers", action="store_true",
                        help="print the registered consumers and their positions, and the "
                             "highest position the retention removed (one JSON line)")
    events.add_argument("--forget-consumer", metavar="NAME",
                        help="unregister a consumer gone for good: the retention no longer "
                             "keeps events for it (--events-retention)")
    add_api_flags(events)
    again = sub.add_parser("reparse", help="parse archived pages again (no network): new "
                                           "links, fingerprints, one reparse event per capture")
    again.add_argument("--data", type=Path, default=Path("crawl-data"))
    again.add_argument("--archive", help=ARCHIVE_HELP)
    again.add_argument("--since", help="only captures fetched at or after this time "
                                       "(ISO 8601, UTC unless an offset is given, or POSIX)")
    again.add_argument("--host", help="only captures of this host (name, or name:port)")
    again.add_argument("--scope", choices=SCOPES, help="link scope, as for crawl (seeds-hosts)")
    again.add_argument("--from-start", action="store_true",
                       help="ignore the checkpoint of an earlier run (no event is repeated)")
    archive = sub.add_parser("archive", help="archive maintenance")
    archive_actions = archive.add_subparsers(dest="action", required=True)
    gc = archive_actions.add_parser("gc", help="delete WARC files whose captures are all "
                                               "expired and referenced by nothing")
    gc.add_argument("--data", type=Path, default=Path("crawl-data"))
    gc.add_argument("--archive", help=ARCHIVE_HELP)
    gc.add_argument("--keep-last", type=int, help="captures of each URL to keep (newest)")
    gc.add_argument("--keep-days", type=float, help="keep captures younger than this")
    gc.add_argument("--cursor-file", type=Path, action="append", default=[],
                    help="a consumer's cursor file (repeatable): an event id (events "
                         "--cursor-file) or a per-shard token (index --cursor-file); events "
                         "above any of them are unconsumed and keep their records")
    gc.add_argument("--consumed-up-to", type=int, help="event id every consumer has read")
    gc.add_argument("--dry-run", action="store_true", help="list, delete nothing")
    export = sub.add_parser("export", help="export crawl records (audit JSON lines, CDXJ)")
    export.add_argument("what", choices=("audit", "cdxj"),
                        help="audit: one line per fetch with robots.txt version and delay "
                             "applied; cdxj: a sorted CDXJ index of the WARC files (pywb)")
    export.add_argument("--data", type=Path, default=Path("crawl-data"))
    export.add_argument("--archive", help="cdxj: WARC root, a folder or fsspec URL "
                                          "(default: the archive the crawl in --data wrote "
                                          "to, every worker's folder)")
    add_store_flag(export)
    add_store_flag(again)
    add_store_flag(gc)


def domain_of(host: str) -> str:
    """The API's ``{domain}`` (host or host:port) of a host name or URL."""
    from courtier.core.urls import canonicalize

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
    fresh_path = path.removesuffix("/policy") + "/freshness"
    status: int = 200
    answer: dict[str, Any] = {}
    if args.action == "set":
        fresh = {"tier": args.tier, "min_interval": args.min_interval,
                 "max_interval": args.max_interval, "value_factor": args.value}
        body = {"delay": args.delay, "max_in_flight": args.max_in_flight,
                "max_pages": args.max_pages_per_day, "blocked": bool(args.block)}
        wants_fresh = any(v is not None for v in fresh.values())
        if args.block or not wants_fresh or any(
                body[k] is not None for k in ("delay", "max_in_flight", "max_pages")):
            status, answer = await call(args, "PUT", path, body)
        if wants_fresh and 200 <= status < 300:  # --tier alone leaves politeness as it is
            status, answer["freshness"] = await call(args, "PUT", fresh_path, fresh)
    else:
        method = "DELETE" if args.action == "clear" else "GET"
        status, answer = await call(args, method, path)
        if 200 <= status < 300:
            status, answer["freshness"] = await call(args, method, fresh_path)
    out.write(json.dumps(answer, sort_keys=True) + "\n")
    return 0 if 200 <= status < 300 else 1


def _events_limit(args: argparse.Namespace) -> int | None:
    limit: int | None = args.limit
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit {limit}: give a positive number of events "
                          "(leave it out for every event)")
    return limit


async def _events(args: argparse.Namespace, out: TextIO) -> int:
    """Print events after the cursor as JSON lines. Without ``--follow``: every event up
    to now, paged (``events/drain.py``), then exit 0; ``--limit N`` caps the total.
    With ``--follow`` keep going across restarts of the crawl or its API (a failed call
    is retried) until ``--max-seconds`` or ``--limit``. With ``--cursor-file`` across
    restarts of this command: the cursor is saved only after its events were printed
    and flushed (at-least-once delivery). A failure is raised (stderr, non-zero exit)
    after the pages already printed, whose cursor is saved."""
    cursor_file: Path | None = args.cursor_file
    from courtier.events.cursor import load_cursor, save_cursor

    if getattr(args, "consumers", False) or getattr(args, "forget_consumer", None):
        return await _registered_consumers(args, out)
    limit = _events_limit(args)
    if getattr(args, "by_shard", False) and getattr(args, "consumer", None) is None:
        raise ConfigError("--by-shard: give it with --consumer NAME (a per-shard cursor "
                          "that is not registered is --cursor TOKEN)")
    if getattr(args, "consumer", None) is not None:
        return await _consumer_events(args, out, limit)
    if getattr(args, "shard_cursor", None) is not None:
        return await _shard_cursor_events(args, out, limit)
    cursor = load_cursor(cursor_file, args.after)

    def emit(events: list[dict[str, Any]], next_after: int) -> None:
        nonlocal cursor
        _print_events(events, out)
        if next_after != cursor:
            cursor = next_after
            if cursor_file is not None:
                save_cursor(cursor_file, cursor)

    if not args.follow:
        from courtier.cli.call import open_caller
        from courtier.events.drain import drain

        async with open_caller(args) as caller:
            async for page in drain(page_reader(caller), cursor, limit):
                emit(page.events, page.next_after)
        return 0
    from courtier.events.drain import PAGE_SIZE

    loop = asyncio.get_running_loop()
    deadline = None if args.max_seconds is None else loop.time() + args.max_seconds
    left = limit
    while True:
        size = PAGE_SIZE if left is None else min(PAGE_SIZE, left)
        try:
            status, answer = await call(args, "GET", f"/v1/events?after={cursor}&limit={size}")
        except CourtierError as exc:
            if isinstance(exc, ConfigError):
                raise
            status, answer = 0, {"events": [], "next_after": cursor}  # down: try again
        if status and not 200 <= status < 300:
            raise answer_error(status, answer)
        emit(answer["events"], answer.get("next_after", cursor))
        if left is not None:
            left -= len(answer["events"])
            if left <= 0:
                return 0
        if deadline is not None and loop.time() >= deadline:
            return 0
        if not answer["events"]:
            await asyncio.sleep(0.5)


def _print_events(events: list[dict[str, Any]], out: TextIO) -> None:
    for event in events:
        out.write(json.dumps(event, sort_keys=True) + "\n")
    out.flush()


async def _consumer_events(args: argparse.Namespace, out: TextIO, limit: int | None) -> int:
    """``events --consumer NAME``: every event after NAME's registered position (0 for a new
    name) up to now, paged; the position advances to the last event of each page after
    the page is printed and flushed (at-least-once delivery, like ``--cursor-file``)."""
    for flag, given in (("--api", args.api), ("--follow", args.follow),
                        ("--cursor-file", args.cursor_file), ("--after", args.after)):
        if given:
            raise ConfigError(f"--consumer: give it without {flag} (the store keeps the "
                              "cursor; --data or --store name the store)")
    name = check_consumer_name(args.consumer)
    from courtier.cli.call import open_args_store, store_caller
    from courtier.events.drain import drain

    async with open_args_store(args) as store:
        if args.by_shard or await store.shard_consumer_position(name) is not None:
            start = await store.register_shard_consumer(name)

            async def acknowledge(token: str) -> None:
                await store.advance_shard_consumer(name, ShardCursor.from_token(token))

            await _drain_by_shard(store_caller(store), start.token(), limit, out, acknowledge)
            return 0
        cursor = await store.register_consumer(name)
        async for page in drain(page_reader(store_caller(store)), cursor, limit):
            _print_events(page.events, out)
            await store.advance_consumer(name, page.next_after)
    return 0


async def _drain_by_shard(caller: Caller, token: str, limit: int | None, out: TextIO,
                          acknowledge: Callable[[str], Awaitable[None]]) -> str:
    """Print the events above the per-shard cursor ``token`` up to now (until the token
    stops moving, or ``limit``), each page before ``acknowledge`` gets its next token;
    the last token."""
    from courtier.events.drain import PAGE_SIZE

    left = limit
    while left is None or left > 0:
        size = PAGE_SIZE if left is None else min(PAGE_SIZE, left)
        status, answer = await caller("GET", f"/v1/events?cursor={quote(token)}&limit={size}",
                                      None)
        if not 200 <= status < 300:
            raise answer_error(status, answer)
        _print_events(answer["events"], out)
        if left is not None:
            left -= len(answer["events"])
        if answer["cursor"] == token:
            break
        token = answer["cursor"]
        await acknowledge(token)
    return token


async def _shard_cursor_events(args: argparse.Namespace, out: TextIO,
                               limit: int | None) -> int:
    """``events --cursor TOKEN``: the events above a per-shard cursor up to now (until the
    token stops moving, or ``--limit``), over the store or the API; the last token goes
    to stderr after every event was printed and flushed."""
    for flag, given in (("--follow", args.follow), ("--cursor-file", args.cursor_file),
                        ("--after", args.after)):
        if given:
            raise ConfigError(f"--cursor: give it without {flag} (the token is the cursor)")
    from courtier.cli.call import open_caller

    async def nothing(token: str) -> None:
        return None

    async with open_caller(args) as caller:
        token = await _drain_by_shard(caller, args.shard_cursor, limit, out, nothing)
    print(f"cursor {token}", file=sys.stderr, flush=True)
    return 0


async def _registered_consumers(args: argparse.Namespace, out: TextIO) -> int:
    """``events --consumers`` / ``--forget-consumer NAME``: one JSON line; exit 1 when
    the name to forget was not registered."""
    if args.api:
        raise ConfigError("--consumers, --forget-consumer: give --data or --store, not --api")
    from courtier.cli.call import open_args_store

    async with open_args_store(args) as store:
        answer: dict[str, Any] = {}
        code = 0
        if args.forget_consumer:
            name = check_consumer_name(args.forget_consumer)
            answer["forgotten"] = await store.forget_consumer(name)
            code = 0 if answer["forgotten"] else 1
        answer["consumers"] = await store.consumers()
        answer["shard_consumers"] = {name: cursor.token() for name, cursor
                                     in (await store.shard_consumers()).items()}
        answer["pruned_through"] = await store.events_pruned_through()
    out.write(json.dumps(answer, sort_keys=True) + "\n")
    return code


async def _export_audit(store: Store, out: TextIO) -> int:
    cursor = 0
    while rows := await store.fetch_log(after=cursor, limit=5000):
        for row in rows:
            out.write(json.dumps(row, sort_keys=True) + "\n")
        cursor = rows[-1]["id"]
    return 0


def parse_since(text: str | None) -> float | None:
    """``--since``: POSIX seconds or an ISO 8601 date/time (UTC when no offset)."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"--since {text!r}: not an ISO 8601 time or POSIX seconds") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


async def _reparse(args: argparse.Namespace, store: Store, out: TextIO) -> int:
    from courtier.core.config import CrawlConfig
    from courtier.crawl.intake import Intake, Scope
    from courtier.crawl.reparse import Selection, reparse, restore_scope_seeds
    from courtier.parse.html import PARSER_VERSION

    selection = Selection(parse_since(args.since), args.host)
    config = CrawlConfig(scope=args.scope) if args.scope else CrawlConfig()
    intake = Intake(Scope(config, []))
    restore_scope_seeds(intake, await store.seed_urls())
    root, *more = _roots(args)
    report = await reparse(store, root, intake, selection=selection,
                           checkpoint=args.data / f"reparse-v{PARSER_VERSION}.cursor",
                           from_start=args.from_start, more_roots=more)
    out.write(json.dumps(dataclasses.asdict(report), sort_keys=True) + "\n")
    return 0


async def _archive_gc(args: argparse.Namespace, store: Store, out: TextIO) -> int:
    import time

    from courtier.archive.retention import RetentionRule, collect_garbage

    if args.keep_last is None and args.keep_days is None:
        raise ConfigError("archive gc: give --keep-last N and/or --keep-days D")
    if (args.keep_last is not None and args.keep_last < 1) or \
            (args.keep_days is not None and args.keep_days < 0):
        raise ConfigError("--keep-last must be >= 1 and --keep-days >= 0")
    from courtier.archive.retention import Consumed
    from courtier.events.cursor import load_consumed

    cursors: list[int | ShardCursor] = [load_consumed(path) for path in args.cursor_file]
    if args.consumed_up_to is not None:
        cursors.append(args.consumed_up_to)
    root, *more = _roots(args)
    report = await collect_garbage(store, root, RetentionRule(args.keep_last, args.keep_days),
                                   time.time(), Consumed.of(cursors), args.dry_run,
                                   more_roots=more)
    out.write(json.dumps(dataclasses.asdict(report), sort_keys=True) + "\n")
    return 0


def _roots(args: argparse.Namespace) -> list[str]:
    """``--archive``, else every WARC root the crawl in ``--data`` wrote to (each worker's
    folder of ``crawl --workers N``; ``DATA/warc`` for a crawl from before they were
    remembered)."""
    from courtier.archive.roots import archive_roots

    return [str(args.archive)] if args.archive else archive_roots(args.data)


def _export_cdxj(args: argparse.Namespace, out: TextIO) -> int:
    from courtier.archive.cdxj import main_stderr_note, write_cdxj
    from courtier.archive.roots import archive_roots

    if args.archive:
        main_stderr_note(write_cdxj(str(args.archive), out))
        return 0
    roots = archive_roots(args.data)
    local = [root for root in roots if "://" not in root]
    missing = [root for root in local if not Path(root).is_dir()]
    if missing == roots:
        raise ConfigError(f"--data {args.data}: no WARC folder here ({', '.join(missing)})")
    if len(roots) == 1:
        main_stderr_note(write_cdxj(roots[0], out))
        return 0
    # several workers' folders: one index, each filename relative to --data
    present = [root for root in roots if root not in missing]
    main_stderr_note(write_cdxj(present[0], out, present[1:], dir_root=str(args.data)))
    return 0


def run_admin(args: argparse.Namespace, out: TextIO | None = None) -> int:
    import asyncio

    stream = out or sys.stdout
    if args.command == "policy":
        return asyncio.run(_policy(args, stream))
    if args.command == "events":
        return asyncio.run(_events(args, stream))
    if args.command == "reparse":
        return asyncio.run(_with_store(args, lambda s: _reparse(args, s, stream)))
    if args.command == "archive":
        return asyncio.run(_with_store(args, lambda s: _archive_gc(args, s, stream)))
    if args.what == "cdxj":
        return _export_cdxj(args, stream)
    return asyncio.run(_with_store(args, lambda s: _export_audit(s, stream)))
