"""A running crawl bounds its own outbox: the retention task runs beside the crawl loop
(crawl/app.py) and removes the events older than ``--events-retention``.

Seen red: with the task not started in ``crawl/app.py``, nothing was pruned
(``events_pruned_through() == 0``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from courtier.crawl import outbox_retention
from courtier.crawl.app import crawl
from courtier.store.sqlite import SqliteStore
from courtier.testweb import TestWebServer, default_web
from tests.integration.crawl.test_crawl_testweb import config_for


@pytest.mark.timeout(120)
async def test_a_continuous_crawl_prunes_its_old_events(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outbox_retention, "FIRST_RUN_AFTER", 3.0)
    monkeypatch.setattr(outbox_retention, "RUN_EVERY", 1.0)
    data = tmp_path / "data"
    async with TestWebServer(default_web(n_hosts=2, pages_per_host=5)) as server:
        config = config_for(server, data, continuous=True, max_seconds=8.0,
                            events_retention=0.5, recrawl_interval=1.0)
        await crawl(config, install_signals=False)  # type: ignore[arg-type]
    store = SqliteStore(data / "courtier.db")
    await store.open()
    try:
        through = await store.events_pruned_through()
        assert through > 0
        kept = await store.read_events(through, 10_000)
        # the tallies still count every event ever written, the removed ones too
        assert (await store.event_counts()).events == through + len(kept)
    finally:
        await store.close()
