"""Daily budgets survive a restart: a second run on the same --data continues the
day's counts instead of spending the budget again (judged from the server's log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from courtier.core.urls import canonicalize
from courtier.crawl.app import crawl
from courtier.store.base import DAILY_BUDGET_KEY
from courtier.store.sqlite import SqliteStore
from courtier.testweb import TestWebServer, default_web
from tests.integration.crawl.test_crawl_testweb import config_for


def page_gets(server: TestWebServer) -> list[str]:
    return [r.path_qs for r in server.log
            if r.method == "GET" and not r.path_qs.startswith("/robots")]


@pytest.mark.timeout(120)
async def test_global_daily_budget_is_not_spent_twice(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with TestWebServer(default_web(n_hosts=2, pages_per_host=8, crawl_delay=0.1)) as server:
        first = await crawl(config_for(server, data, daily_budget=240, max_pages=4),  # type: ignore[arg-type]
                            install_signals=False)
        assert first.stop_reason == "max pages"
        before = len(page_gets(server))
        assert before == 4
        # the restarted crawl allows 4 a day: the 4 fetched this "day" already spent it
        second = await crawl(config_for(server, data, daily_budget=4, max_seconds=30),  # type: ignore[arg-type]
                             install_signals=False)
        assert second.stop_reason == "daily budget spent"
        assert len(page_gets(server)) == before
    store = SqliteStore(data / "courtier.db")
    await store.open()
    try:
        saved = await store.load_day_counts([DAILY_BUDGET_KEY])
    finally:
        await store.close()
    assert saved[DAILY_BUDGET_KEY].used == 4


@pytest.mark.timeout(120)
async def test_per_host_pages_per_day_continue_after_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with TestWebServer(default_web(n_hosts=1, pages_per_host=10, crawl_delay=0.1)) as server:
        seed = server.web.seeds()[0]
        host_key = canonicalize(seed).host_key
        store = SqliteStore(data / "courtier.db")
        await store.open()
        await store.set_policy(host_key, canonicalize(seed).shard, None, None, 3, False)
        await store.close()
        await crawl(config_for(server, data, max_pages=2), install_signals=False)  # type: ignore[arg-type]
        assert len(page_gets(server)) == 2
        await crawl(config_for(server, data), install_signals=False)  # type: ignore[arg-type]
        assert len(page_gets(server)) == 3  # 1 more, not 3 more: the day's window continued
