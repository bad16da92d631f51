"""A fetch held far past every bound of its steps is logged with where it waits.

The one-worker PostgreSQL crawl of the realistic web under load left 58 hosts without a
request for 13 minutes and ended only by SIGTERM; nothing in its log said where their
fetches were. Here a store call that never answers (a bug: the worker's store calls are
bounded, crawl/app.py) holds one fetch: the worker names it, once, with its await chain,
and the crawl ends once the call answers."""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

import pytest

from courtier.crawl.intake import Intake, Scope
from courtier.crawl.worker import Worker
from courtier.frontier.traps import TemplateTracker, TrapRules
from courtier.sim.archive import DigestOnlyArchive
from courtier.sim.loop import run_virtual
from courtier.sim.run import SimCrawl, sim_config
from courtier.store.base import Store
from tests.sim.test_faults import allowed, page_counts, small_web


class HangingStore:
    """The crawl's store, except that its first payload lookup waits for ``gate``."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.gate = asyncio.Event()
        self.held = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name != "payload_locations" or not inspect.iscoroutinefunction(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.held == 0:
                self.held += 1
                await self.gate.wait()
            return await attr(*args, **kwargs)

        return call


class _OpenOnOverdue(logging.Handler):
    """Answers the held call once the worker has named the held fetch."""

    def __init__(self, hanging: HangingStore) -> None:
        super().__init__()
        self.hanging = hanging
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) == "fetch_overdue":
            self.records.append(record)
            self.hanging.gate.set()


def test_a_fetch_held_by_a_store_call_that_never_answers_is_named(
        caplog: pytest.LogCaptureFixture) -> None:
    """Seen red with the worker's turn not asking ``InFlight.overdue``: the crawl never
    ended (the held call was never answered; the test timed out)."""
    async def go() -> None:
        crawl = SimCrawl(small_web(n_hosts=3, pages=4), sim_config(delay=0.5))
        await crawl.store.open()
        hanging = HangingStore(crawl.store)
        intake = Intake(Scope(crawl.config, []),
                        traps=TemplateTracker(TrapRules(), crawl.clock))
        worker = Worker(crawl.config, hanging, crawl.transport,  # type: ignore[arg-type]
                        DigestOnlyArchive(), crawl.clock, intake)
        handler = _OpenOnOverdue(hanging)
        logging.getLogger("courtier.worker").addHandler(handler)
        try:
            rows, problems = intake.seed_urls(list(enumerate(crawl.web.seeds(), 1)), "sim",
                                              crawl.clock.now())
            assert not problems
            await worker.add_seeds(rows)
            status = await worker.run()
        finally:
            logging.getLogger("courtier.worker").removeHandler(handler)
        assert status.stop_reason == "nothing due", status.stop_reason
        # the three home pages wait on the one batched lookup: each named once
        urls = [record.event_fields["url"] for record in handler.records]  # type: ignore[attr-defined]
        assert sorted(urls) == sorted(crawl.web.seeds())
        for record in handler.records:
            message = record.getMessage()
            assert "(answered)" in message  # held after its answer came
            assert "> _after_response:" in message and "> _first_copy:" in message
        assert set(page_counts(crawl)) == allowed(crawl.web)

    run_virtual(go())
