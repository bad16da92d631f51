"""The errors-by-host tally (``GET /v1/hosts/top?by=errors``) folds the outbox in with a
per-shard cursor (``read_events_by_shard``): each event counted once, across shards and
across calls, with no integer-position read (so no outbox sequencer on PostgreSQL).

Seen red: with the tally's cursor left where it was after a fold (``self.tally.cursor =
page.cursor`` removed) the second call counted the first events again (b.test 3, not 2);
with main's tally (``read_events``) the spy failed: "the tally read by integer position"."""

from __future__ import annotations

from typing import Any

from courtier.api.control import StoreOnlyControl
from courtier.core.clock import VirtualClock
from courtier.core.outcome import Outcome
from courtier.store.memory import MemoryStore
from tests.contract.conftest import T0
from tests.contract.test_store_contract import done, new


class NoIntegerReads(MemoryStore):
    async def read_events(self, after: int, limit: int) -> Any:
        raise AssertionError("the tally read by integer position")


async def fetch(store: MemoryStore, urls: list[tuple[str, int]], outcome: Outcome) -> None:
    await store.add_urls([new(u, shard=s) for u, s in urls])
    await store.load_due(sorted({s for _, s in urls}), T0 + 10, 100, 100)
    await store.commit([done(u, shard=s, outcome=outcome) for u, s in urls])


async def test_errors_by_host_count_each_event_once_across_shards_and_calls() -> None:
    store = NoIntegerReads(clock=VirtualClock(T0))
    control = StoreOnlyControl(store, clock=store.clock)
    await fetch(store, [("http://a.test/1", 1), ("http://b.test/1", 7)], Outcome.RETRY)
    await fetch(store, [("http://a.test/2", 1)], Outcome.RETRY)
    await fetch(store, [("http://c.test/1", 3)], Outcome.OK)
    first = {h["host_key"]: h["errors"] for h in await control.top_hosts("errors", 10)}
    assert first == {"http://a.test": 2, "http://b.test": 1}
    await fetch(store, [("http://b.test/2", 7)], Outcome.ERROR)
    again = {h["host_key"]: h["errors"] for h in await control.top_hosts("errors", 10)}
    assert again == {"http://a.test": 2, "http://b.test": 2}
    assert control.tally.events == 5
