"""Near-duplicates in a real crawl: pages one word apart are marked, refreshed less often
and less eagerly, and still followed. Fetches are judged from the server's log."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from courtier.core.urls import canonicalize
from courtier.store.sqlite import SqliteStore
from courtier.testweb import HostSpec, TestWebServer, WebSpec
from tests.integration.politeness.helpers import run_crawl

NEAR = 4


@pytest.mark.timeout(120)
async def test_near_duplicates_are_marked_spaced_and_keep_their_links(tmp_path: Path) -> None:
    spec = WebSpec(hosts=[HostSpec("near.test", pages=1, near_duplicates=NEAR)])
    data = tmp_path / "d"
    async with TestWebServer(spec) as server:
        await asyncio.wait_for(run_crawl(server, data, delay=0.05), 60)
        log = sorted(server.log, key=lambda r: r.start)
        near_urls = [server.url("near.test", r.path_qs) for r in log
                     if r.path_qs.startswith("/near/")]
        leaves = {r.path_qs for r in log if r.path_qs.startswith("/near-leaf/")}
    assert len(near_urls) == NEAR  # each fetched once, in this order
    # every near-duplicate's own link was followed: its leaf was fetched
    assert leaves == {f"/near-leaf/{k}.html" for k in range(NEAR)}
    store = SqliteStore(data / "courtier.db")
    await store.open()
    try:
        rows = [await store.get_url(canonicalize(u).url_key) for u in near_urls]
    finally:
        await store.close()
    assert all(r is not None and r["outcome"] == "ok" for r in rows)
    first, *later = rows
    assert first is not None and first["near_dup_of"] is None  # the first copy is the original
    for row in later:
        assert row is not None and row["near_dup_of"]
        assert row["interval"] > first["interval"]   # refreshed less often...
        assert row["priority"] < first["priority"]   # ...and after the original
