"""A page the parser would chew on for minutes is kept without links; the crawl goes on.

The slow parse is made deterministic: the worker's guarded parser runs an
injected parse that never finishes (standing for the parser's quadratic worst
case), through the real worker → OffLoopParser → GuardedParser → child-process path, so the
test does not depend on how fast this machine parses nested markup.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

import pytest
from aiohttp import web

from courtier.core.urls import canonicalize
from courtier.crawl.app import crawl
from courtier.parse import offload as offload_module
from courtier.parse.guard import GUARD_TAGS, GuardedParser
from courtier.parse.html import ParsedPage
from courtier.store.sqlite import SqliteStore
from tests.integration.serve import loopback_crawl, serve

# just enough markup to be parsed under the budget (the real parser is quick on it)
DEEP = (b"<html><body>" + b"<div>" * (GUARD_TAGS + 10)
        + b'<a href="/hidden">x</a></body></html>')
HOME = b'<html><body><a href="/deep">deep</a> <a href="/p1">one</a></body></html>'
P1 = b'<html><body><a href="/p2">two</a></body></html>'
P2 = b"<html><body>end</body></html>"


def never_finishes(body: bytes, url: str, content_type: str | None,
                   x_robots_tag: str | None, agent: str) -> ParsedPage:
    """Runs in the parse child: a parse that would take an hour."""
    time.sleep(3600)
    raise AssertionError("unreachable")


@pytest.mark.timeout(120)
async def test_pathological_page_is_cut_by_the_parse_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the worker's off-loop parser builds its guarded child parser from this name
    monkeypatch.setattr(offload_module, "GuardedParser",
                        functools.partial(GuardedParser, target=never_finishes))
    pages = {"/": HOME, "/deep": DEEP, "/p1": P1, "/p2": P2, "/hidden": P2}
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.path)
        body = pages.get(request.path)
        if body is None:
            return web.Response(status=404)
        return web.Response(body=body, content_type="text/html")

    async with serve(handle) as port:
        config = loopback_crawl(tmp_path, "deep.test", (f"http://deep.test:{port}/",),
                                parse_timeout=1.0)
        status = await crawl(config, install_signals=False)
    assert status.stop_reason == "nothing due"
    assert {"/", "/deep", "/p1", "/p2"} <= set(seen)
    assert "/hidden" not in seen  # the deep page's links were not read
    store = SqliteStore(tmp_path / "data" / "courtier.db")
    await store.open()
    try:
        row = await store.get_url(canonicalize(f"http://deep.test:{port}/deep").url_key)
    finally:
        await store.close()
    assert row is not None and row["outcome"] == "ok" and row["error_kind"] == "parse_budget"
    assert row["warc_file"]  # archived all the same
