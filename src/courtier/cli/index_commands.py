"""``courtier index`` and ``courtier search``: the reference consumer of the event feed.

``index`` follows the feed of a crawl — its store (``--data``, ``--store``) or its admin
API (``--api``) — by per-shard cursor (``GET /v1/events?cursor=``, no outbox sequencer),
reads each HTML page from the crawl's WARC files and keeps a local SQLite FTS5 index
(``DATA/search.db`` by default) with the feed cursor inside it (``courtier.consumer``).
``search`` answers from that file: URL and title per hit.

An index file or a ``--consumer`` name from before the per-shard feed holds a crawl-wide
(integer) position; it is converted in place (:func:`convert_legacy`), over the store or
over ``--api`` alike, by the API operation ``GET /v1/events/cursor?at=N``
(docs/events.md, "Feed a search index").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from courtier.cli.call import add_api_flags, add_store_flag, check_consumer_name
from courtier.core.errors import ConfigError

if TYPE_CHECKING:
    from courtier.consumer.index_db import SearchIndex
    from courtier.core.shard_cursor import ShardCursor
    from courtier.store.base import Store

# the consumer, the API and aiohttp load inside the functions that use them, so that
# ``courtier --help`` and argument errors answer at once

#: the index file's name under --data
INDEX_NAME = "search.db"
DEFAULT_BATCH = 200


def add_index_commands(sub: Any) -> None:
    index = sub.add_parser(
        "index", help="build or update a local full-text search index from a crawl's "
                      "event feed (SQLite FTS5; resumes where it stopped)")
    index.add_argument("--data", type=Path, metavar="DIR",
                       help="the crawl's --data folder: its store (unless --store or --api), "
                            "its WARC folders and the index (DATA/search.db); "
                            "default crawl-data when neither --store nor --api is given")
    add_store_flag(index)
    add_api_flags(index)
    index.add_argument("--index", type=Path, metavar="FILE",
                       help="the index file (default DATA/search.db)")
    index.add_argument("--archive", action="append", default=[], metavar="ROOT",
                       help="a WARC root the crawl wrote to, folder or fsspec URL "
                            "(repeatable; default DATA/warc and DATA/worker-*/warc)")
    index.add_argument("--follow", action="store_true",
                       help="keep following the feed until Ctrl-C or SIGTERM")
    index.add_argument("--cursor-file", type=Path, metavar="FILE",
                       help="also write the index's per-shard cursor token here after each "
                            "batch, for `courtier archive gc --cursor-file FILE` (it may lag "
                            "the index, never lead it)")
    index.add_argument("--consumer", metavar="NAME",
                       help="also advance the per-shard consumer registered in the store "
                            "under NAME after each batch (registered if new, converted if "
                            "registered with a crawl-wide position; it may lag the index, "
                            "never lead it; not with --api)")
    index.add_argument("--batch", type=int, default=DEFAULT_BATCH, metavar="N",
                       help=f"events (per-shard positions) per read and transaction, "
                            f"1-1000 ({DEFAULT_BATCH})")
    search = sub.add_parser("search", help="search the index built by `courtier index`: "
                                           "URL and title of the best pages")
    search.add_argument("query", nargs="*", help="words that must all appear (word* for "
                                                 "a prefix)")
    search.add_argument("--data", type=Path, default=Path("crawl-data"), metavar="DIR",
                        help="the crawl's --data folder, whose search.db is searched "
                             "(crawl-data)")
    search.add_argument("--index", type=Path, metavar="FILE",
                        help="the index file (default DATA/search.db)")
    search.add_argument("--limit", type=int, default=10, metavar="N", help="hits to print (10)")
    search.add_argument("--json", action="store_true",
                        help="print the hits as JSON (score, snippet, totals)")


def run_index_commands(args: argparse.Namespace, out: TextIO | None = None) -> int:
    stream = out or sys.stdout
    if args.command == "search":
        return run_search(args, stream)
    return asyncio.run(_index(args, stream))


def run_search(args: argparse.Namespace, out: TextIO) -> int:
    from courtier.consumer.index_db import SearchIndex
    from courtier.consumer.search import render_json, render_text, search

    query = " ".join(args.query).strip()
    if not query:
        raise ConfigError("search: give words to search for, e.g. "
                          "courtier search polite crawler --data crawl-data")
    path = args.index or args.data / INDEX_NAME
    flag = "--index" if args.index else "--data"
    index = SearchIndex.open(path, create=False, flag=flag)
    try:
        found = search(index, query, args.limit)
    finally:
        index.close()
    out.write(render_json(found) if args.json else render_text(found))
    if not args.json and not found.hits:
        print(f"courtier: no page matches {query!r} ({found.pages} pages in {path})",
              file=sys.stderr)
    return 0


def index_settings(args: argparse.Namespace) -> tuple[Path, list[str], Path]:
    """(index file, WARC roots, --data folder of the feed) from the flags, each checked."""
    if args.store and args.api:
        raise ConfigError("index: give --store or --api, not both")
    if getattr(args, "consumer", None) is not None:
        if args.api:
            raise ConfigError("--consumer: give it without --api (the cursor is registered "
                              "in the store --data or --store names)")
        check_consumer_name(args.consumer)
    if not 1 <= args.batch <= 1000:
        raise ConfigError(f"--batch {args.batch}: give 1 to 1000 events")
    cursor_file: Path | None = args.cursor_file
    if cursor_file is not None and (cursor_file.is_dir() or not cursor_file.parent.is_dir()):
        raise ConfigError(f"--cursor-file {cursor_file}: not a file in an existing folder")
    remote_feed = bool(args.store or args.api)
    data: Path | None = args.data if args.data is not None or remote_feed \
        else Path("crawl-data")
    if data is not None and data.exists() and not data.is_dir():
        raise ConfigError(f"--data {data}: is a file, not a crawl folder")
    if args.index is not None:
        path = args.index
    elif data is not None:
        path = data / INDEX_NAME
    else:
        raise ConfigError("--index FILE: where to keep the index (with --store or --api "
                          "there is no --data folder to keep it in)")
    from courtier.consumer.pages import archive_roots

    roots: list[str] = list(args.archive)
    for root in roots:
        if "://" not in root and not Path(root).is_dir():
            raise ConfigError(f"--archive {root}: no such folder")
    if not roots:
        if data is None:
            raise ConfigError("--archive ROOT: where the crawl wrote its WARC files (with "
                              "--store or --api there is no --data folder to look in)")
        if not data.is_dir():
            raise ConfigError(f"--data {data}: no such folder")
        roots = archive_roots(data)
        if not roots:
            raise ConfigError(f"--data {data}: no WARC folder here (warc/ or worker-*/warc/);"
                              " --archive ROOT names the folder the crawl wrote to")
    return path, roots, data or Path("crawl-data")


CursorAt = Callable[[int], Awaitable["ShardCursor"]]


@contextlib.asynccontextmanager
async def open_feed(args: argparse.Namespace) -> AsyncIterator[tuple[Any, Any, CursorAt]]:
    """The feed as a :data:`courtier.events.drain.ShardPageReader`: over ``--api``, else
    over the store (``--store``, or the SQLite database under ``--data``) in this process;
    that store (None over ``--api``), where a ``--consumer`` is kept; and the per-shard
    cursor of an event id (``GET /v1/events/cursor``, either way), which converts an old
    crawl-wide cursor."""
    from courtier.cli.call import (
        open_args_store,
        open_caller,
        shard_cursor_finder,
        shard_page_reader,
        store_caller,
    )

    if not getattr(args, "api", None):
        async with open_args_store(args) as store:
            caller = store_caller(store)
            yield shard_page_reader(caller), store, shard_cursor_finder(caller)
        return
    async with open_caller(args) as caller:
        yield shard_page_reader(caller), None, shard_cursor_finder(caller)


#: the suffix of the per-shard consumer that holds the outbox while ``--consumer NAME`` is
#: converted from a crawl-wide position (:func:`convert_consumer`)
HOLD_SUFFIX = "~converting"


def hold_name(name: str) -> str:
    """The name of the hold taken while ``name`` is converted (at most 100 characters)."""
    return name[:100 - len(HOLD_SUFFIX)] + HOLD_SUFFIX


async def convert_legacy(index: SearchIndex, cursor_at: CursorAt) -> None:
    """An index file holding a crawl-wide position N (format 1): replace it by
    ``cursor_at(N)`` (``Store.shard_cursor_at`` through the API operation, over the
    store or ``--api``), the per-shard cursor below which every event was read at N
    (some above it may be read again: the index applies a URL's version at most once as
    newest, so a repeat changes nothing). N already pruned: the retention's error."""
    position = index.legacy_position()
    if position is None:
        return
    await asyncio.to_thread(index.convert, position, await cursor_at(position))


async def convert_consumer(store: Store, name: str, cursor: ShardCursor) -> None:
    """Make ``name`` a per-shard consumer at most at ``cursor`` (the index's, converted):
    a name registered with a crawl-wide position is forgotten and registered again per
    shard. A per-shard hold (:func:`hold_name`) is registered first and forgotten last,
    so the retention removes nothing unread meanwhile; a run stopped half-way leaves the
    hold, which the next run forgets once ``name`` is per shard."""
    hold = hold_name(name)
    if await store.consumer_position(name) is not None:
        await store.register_shard_consumer(hold)
        await store.forget_consumer(name)
    await store.register_shard_consumer(name)
    await store.advance_shard_consumer(name, cursor)
    if await store.shard_consumer_position(hold) is not None:
        await store.forget_consumer(hold)


async def index_crawl(args: argparse.Namespace, path: Path, roots: list[str],
                      out: TextIO, stop: asyncio.Event | None = None) -> int:
    """Run the indexer over the feed ``args`` name; print a line per batch when
    following, a summary at the end. Returns the number of pages in the index."""
    from courtier.consumer.index_db import SearchIndex
    from courtier.consumer.indexer import Indexer, IndexReport
    from courtier.consumer.pages import ArchivedPages
    from courtier.events.cursor import save_shard_cursor
    from courtier.parse.offload import OffLoopParser

    async with open_feed(args) as (feed, store, cursor_at):  # first: a bad --data: no file
        consumer: str | None = getattr(args, "consumer", None)
        index = SearchIndex.open(path, create=True)
        parser = OffLoopParser()
        try:
            await convert_legacy(index, cursor_at)
            if store is not None and consumer is not None:
                await convert_consumer(store, consumer, index.cursor())
            indexer = Indexer(feed, ArchivedPages(roots, parser), index, args.batch)

            follow = bool(getattr(args, "follow", False))
            cursor_file: Path | None = getattr(args, "cursor_file", None)

            async def advance(cursor: ShardCursor) -> None:  # after the commit: lags
                if cursor_file is not None:
                    save_shard_cursor(cursor_file, cursor)
                if store is not None and consumer is not None:
                    await store.advance_shard_consumer(consumer, cursor)

            async def after_batch(report: IndexReport) -> None:
                await advance(report.cursor)
                if follow:
                    out.write(f"courtier: index: {report.line(index.page_count())}\n")
                    out.flush()

            try:
                await indexer.run(follow=follow, stop=stop, on_batch=after_batch)
                if cursor_file is not None or consumer is not None:
                    await advance(index.cursor())
            finally:
                pages = index.page_count()
                out.write(f"courtier: index {path}: {indexer.report.line(pages)}\n")
            return pages
        finally:
            parser.close()
            index.close()


async def _index(args: argparse.Namespace, out: TextIO) -> int:
    path, roots, data = index_settings(args)
    args.data = data  # where open_caller looks for the SQLite store
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # end between batches, nothing half-done
        loop.add_signal_handler(sig, stop.set)
    try:
        await index_crawl(args, path, roots, out, stop)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    out.write(f"search it: courtier search WORDS {_where(args, path)}\n")
    return 0


def _where(args: argparse.Namespace, path: Path) -> str:
    if args.index is None:
        return f"--data {args.data}"
    return f"--index {path}"
