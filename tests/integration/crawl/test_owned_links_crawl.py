"""A live crawl on SQLite decides its links in memory (owner-local URL state, issue 29):
every shard's known keys are loaded before it joins the refill, repeated links are
dropped by the set, and the test web's own log shows every page fetched exactly once.

Broken on a scratch copy: with ``KnownUrls.knows`` always answering None (nothing
decided in memory) ``decided_new`` stayed 0; with the committer's ``remember`` not
passing keys to the set, ``holds`` was all False.
"""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path

import pytest

from courtier.core.urls import SHARD_COUNT, canonicalize
from courtier.testweb import default_web
from tests.integration.api.crawl_harness import live_crawl


@pytest.mark.timeout(120)
async def test_a_crawl_decides_links_in_memory_and_fetches_each_page_once(
        tmp_path: Path) -> None:
    spec = default_web(n_hosts=4, pages_per_host=12, crawl_delay=0.0)
    async with live_crawl(spec, tmp_path, delay=0.0, max_seconds=60.0,
                          known_urls_cap=1_000_000) as live:
        expected = live.server.web.expected_fetches()
        known = live.worker.intake.known
        assert known is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60.0
        while loop.time() < deadline:  # poll the server's log, not the crawler's figures
            fetched = {live.server.url(r.host, r.path_qs) for r in live.server.log
                       if r.method == "GET" and not r.path_qs.startswith("/robots")}
            if fetched >= expected:
                break
            await asyncio.sleep(0.2)
        log = list(live.server.log)
        complete = known.complete_shards()
        decided_new = known.misses
        holds = [known.knows(canonicalize(u).url_key, canonicalize(u).shard) for u in expected]
    gets = [r for r in log if r.method == "GET" and not r.path_qs.startswith("/robots")]
    counts = collections.Counter(live.server.url(r.host, r.path_qs) for r in gets)
    assert set(counts) == expected, sorted(expected - set(counts))[:5]
    assert [u for u, n in counts.items() if n > 1] == []
    assert len(complete) == SHARD_COUNT  # alone, the worker holds and loaded every shard
    assert decided_new > 0  # links found new by the set, written without a Bloom probe
    assert all(holds)  # and it holds every URL the crawl stored (decided known next time)
