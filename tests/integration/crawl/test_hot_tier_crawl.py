"""Real sockets: a host under a hot tier is refetched at the tier's interval (server log),
with conditional GETs answered 304 where the page did not change; SQLite and PostgreSQL
stores (the refill of each does the choosing)."""

from __future__ import annotations

import asyncio
import collections
import itertools
from pathlib import Path

import pytest

from courtier.crawl.app import crawl
from courtier.store.base import HostTierRecord
from courtier.store.open import open_store
from courtier.testweb import TestWebServer
from courtier.testweb.server import RequestRecord
from courtier.testweb.spec import HostSpec, WebSpec
from tests.integration.api.test_api_live import until
from tests.integration.crawl.test_crawl_testweb import config_for

MIN_INTERVAL = 2.0


def visits_of(log: list[RequestRecord], path: str) -> int:
    return sum(1 for r in log if r.host == "news.courtier.test" and r.path_qs == path)


@pytest.mark.timeout(180)
async def test_a_hot_host_is_refetched_at_its_tier_interval_with_304s(
    tmp_path: Path, crawl_store: str | None
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    spec = WebSpec([HostSpec("news.courtier.test", pages=3, changing_pages=2),
                    HostSpec("calm.courtier.test", pages=3)])
    async with TestWebServer(spec) as server:
        store = await open_store(crawl_store, data)
        hot_host = server.web.base_url("news.courtier.test").rstrip("/")
        await store.set_host_tier(HostTierRecord(hot_host, tier="hot"))
        await store.close()
        # a continuous crawl, stopped once the server has seen three visits of every hot
        # page (max_seconds only bounds a crawl that never gets there)
        config = config_for(server, data, store=crawl_store, continuous=True,
                            max_seconds=100.0, delay=0.2,
                            tiers=(f"hot min={MIN_INTERVAL:g} max=4",))
        stop = asyncio.Event()
        run = asyncio.create_task(crawl(config, install_signals=False,  # type: ignore[arg-type]
                                        stop=stop))
        await until(lambda: run.done() or all(
            visits_of(server.log, f"/p/{i}.html") >= 3 for i in range(3)))
        stop.set()
        await run
        log = [r for r in server.log if r.method == "GET" and "/p/" in r.path_qs]
    by_page: dict[tuple[str, str], list[tuple[float, int]]] = collections.defaultdict(list)
    for r in log:
        by_page[(r.host, r.path_qs)].append((r.start, r.status))
    for i in range(3):
        visits = sorted(by_page[("news.courtier.test", f"/p/{i}.html")])
        assert len(visits) >= 3, (i, visits)  # refetched again and again at the hot tier
        gaps = [b[0] - a[0] for a, b in itertools.pairwise(visits)]
        assert min(gaps) >= MIN_INTERVAL - 0.05  # never sooner than the tier's minimum
        statuses = [status for _, status in visits[1:]]
        if i < 2:  # content changes per request: every refetch is a full 200
            assert set(statuses) == {200}
        else:      # unchanged: the conditional GET is answered 304
            assert set(statuses) == {304}
    for i in range(3):  # the default tier (a day at least): fetched once
        assert len(by_page[("calm.courtier.test", f"/p/{i}.html")]) == 1
