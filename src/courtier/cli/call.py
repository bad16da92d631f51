"""One admin API call from a command-line command, and the flags that say where it goes.

``call`` sends the request to a running crawl's API (``--api HOST:PORT`` or a URL, with
``--api-token``/``--api-token-file``/``COURTIER_API_TOKEN``) or, without ``--api``, runs
the same API operation in this process over the crawl's store (``--store``, or the
SQLite database under ``--data``): :func:`courtier.api.routes.invoke`, no server, no
socket. The query commands (:mod:`courtier.cli.query`), ``url import-values``
(:mod:`courtier.cli.values`) and the admin commands (:mod:`courtier.cli.admin`) all go
through it.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from courtier.core.errors import ConfigError, CourtierError
from courtier.store.open import STORE_HELP, data_dir_in_use, is_shared, open_store, store_url

if TYPE_CHECKING:
    from courtier.core.shard_cursor import ShardCursor
    from courtier.events.drain import PageReader, ShardPageReader
    from courtier.store.base import Store

# aiohttp, the API and the configuration load inside the functions that use them,
# so that ``courtier --help`` and argument errors answer at once.


async def _call_api(base: str, token: str | None, method: str, path: str,
                    body: Any) -> tuple[int, Any]:
    import aiohttp

    from courtier.core.config import api_base_url

    base = api_base_url(base)  # HOST:PORT or a URL (README, "The --api address")
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
    # configuration commands may prepare a new crawl (folder and SQLite store, as `crawl`
    # makes them); the read-only ones refuse a folder without a crawl
    prepares = args.command == "seed" or (
        args.command == "policy" and getattr(args, "action", None) in ("set", "clear"))
    store = await open_store(url, args.data, must_exist=not prepares)
    try:
        if (method, path) == ("GET", "/v1/stats"):
            from courtier.api.crawl_figures import stats_answer
            from courtier.core.clock import RealClock
            from courtier.core.config import offline_config

            elsewhere = not is_shared(url) and data_dir_in_use(args.data)
            return await stats_answer(store, offline_config(), RealClock().now(), elsewhere)
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
            from courtier.core.config import read_token_file

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
    async with open_args_store(args) as store:
        yield store_caller(store)


@asynccontextmanager
async def open_args_store(args: argparse.Namespace) -> AsyncIterator[Store]:
    """The existing store ``--store`` or ``--data`` names, opened here and closed after."""
    store = await open_store(store_url(getattr(args, "store", None)), args.data,
                             must_exist=True)
    try:
        yield store
    finally:
        await store.close()


def store_caller(store: Store) -> Caller:
    """A :data:`Caller` running every API operation in-process over ``store``."""
    from courtier.api.control import StoreOnlyControl
    from courtier.api.routes import invoke

    control = StoreOnlyControl(store)

    async def over_store(method: str, path: str, body: Any) -> tuple[int, Any]:
        return await invoke(control, method, path, body)

    return over_store


def add_store_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", help=STORE_HELP)


def add_api_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api", help="a running crawl's admin API: HOST:PORT or "
                                      "http://HOST:PORT, e.g. 127.0.0.1:8790")
    parser.add_argument("--api-token", help="bearer token (visible in ps: prefer "
                                            "COURTIER_API_TOKEN or --api-token-file)")
    parser.add_argument("--api-token-file", type=Path, help="file holding the bearer token")


def answer_error(status: int, answer: Any) -> CourtierError:
    """A non-2xx answer of the events route, as the error the command exits with (its
    message goes to stderr, never into the JSON-lines stream)."""
    text = answer.get("error") if isinstance(answer, dict) else None
    return CourtierError(f"events: answered {status}: {text or json.dumps(answer)}")


def page_reader(caller: Caller) -> PageReader:
    """The events route, page by page, through ``caller`` (a failure is raised)."""
    from courtier.events.drain import Page

    async def read(after: int, size: int) -> Page:
        status, answer = await caller("GET", f"/v1/events?after={after}&limit={size}", None)
        if not 200 <= status < 300:
            raise answer_error(status, answer)
        return Page(answer["events"], answer["next_after"])

    return read


def shard_page_reader(caller: Caller) -> ShardPageReader:
    """The events route by per-shard cursor (``?cursor=TOKEN``), page by page, through
    ``caller`` (a failure is raised)."""
    from urllib.parse import quote

    from courtier.core.shard_cursor import ShardCursor
    from courtier.events.drain import ShardFeedPage

    async def read(cursor: ShardCursor, size: int) -> ShardFeedPage:
        status, answer = await caller(
            "GET", f"/v1/events?cursor={quote(cursor.token())}&limit={size}", None)
        if not 200 <= status < 300:
            raise answer_error(status, answer)
        return ShardFeedPage(answer["events"], ShardCursor.from_token(answer["cursor"]))

    return read


def shard_cursor_finder(caller: Caller) -> Callable[[int], Awaitable[ShardCursor]]:
    """The per-shard cursor of an event id (``GET /v1/events/cursor?at=ID``), through
    ``caller``. An id the retention already passed raises the store's own message
    (the one ``Store.shard_cursor_at`` gives in process); another failure names the
    route and its status."""
    from courtier.core.shard_cursor import ShardCursor

    async def cursor_at(position: int) -> ShardCursor:
        status, answer = await caller("GET", f"/v1/events/cursor?at={position}", None)
        if status == 410 and isinstance(answer, dict) and answer.get("error"):
            raise CourtierError(str(answer["error"]))
        if not 200 <= status < 300:
            text = answer.get("error") if isinstance(answer, dict) else None
            raise CourtierError(f"events/cursor: answered {status}: "
                                f"{text or json.dumps(answer)}")
        return ShardCursor.from_token(answer["cursor"])

    return cursor_at


def check_consumer_name(name: str) -> str:
    """``--consumer``: a registered cursor's name (:func:`consumer_name_problem`)."""
    from courtier.events.cursor import consumer_name_problem

    problem = consumer_name_problem(name)
    if problem is not None:
        raise ConfigError(f"--consumer {name!r}: {problem}")
    return name
