"""The worker's side of the refresh planner: values travel with the refilled rows."""

from __future__ import annotations

import asyncio
from collections.abc import Collection

from courtier.crawl.planning import prepare
from courtier.frontier.recrawl import DAY, RecrawlPolicy
from courtier.frontier.refresh import RefreshPlanner
from courtier.frontier.tiers import TierSet
from courtier.store.base import DueUrl
from courtier.store.memory import MemoryStore


class NoValueLookups(MemoryStore):
    """A store whose separate value look-up is never to be asked (its rows carry them)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[bytes] = []

    async def url_values(self, url_keys: Collection[bytes]) -> dict[bytes, float]:
        self.asked.extend(url_keys)
        return await super().url_values(url_keys)


def _due(key: bytes, value: float | None) -> DueUrl:
    return DueUrl(key * 16, "http://a.test/" + key.decode(), "http://a.test", 1, 1, 0, 1,
                  1000.0, value=value)


def test_prepare_hands_the_planner_the_values_the_rows_carry_without_a_lookup() -> None:
    planner = RefreshPlanner(TierSet.from_specs(("hot min=300 max=3600",), DAY),
                             RecrawlPolicy())
    store = NoValueLookups()
    valued, unvalued = _due(b"v", 7.5), _due(b"u", None)
    asyncio.run(prepare(store, planner, [valued, unvalued]))
    assert store.asked == []  # no round trip of its own
    assert planner.value_of(valued) == (7.5, True)  # the stored value, kept by the plan
    value, stored = planner.value_of(unvalued)
    assert not stored and value != 7.5  # derived (depth, priority), nothing stored
