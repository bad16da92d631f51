"""DayCountLedger: fetch counts are added in the store (not overwritten), so ledgers of
several workers sharing one store sum; a failed write keeps its counts for the next."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from courtier.core.errors import StoreError
from courtier.crawl.day_counts import DayCountLedger
from courtier.store.base import DAILY_BUDGET_KEY, DayCount
from courtier.store.cluster import DayGrant, DayReservation
from courtier.store.memory import MemoryStore

T0 = 1_700_000_000.0


class FlakyStore(MemoryStore):
    """Fails the first ``failures`` day-count writes (applying nothing)."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def reserve_day_counts(self, reservations: Sequence[DayReservation]
                                 ) -> dict[str, DayGrant]:
        if self.failures:
            self.failures -= 1
            raise StoreError("disk full")
        return await super().reserve_day_counts(reservations)


def test_two_ledgers_on_one_store_add_up() -> None:
    async def go() -> dict[str, DayCount]:
        store = MemoryStore()
        first, second = DayCountLedger(store), DayCountLedger(store)
        for _ in range(3):
            first.add(DAILY_BUDGET_KEY, T0)
            second.add(DAILY_BUDGET_KEY, T0)
        second.add("a.test", T0, 2)
        await asyncio.gather(first.saved(), second.saved())
        assert not first.pending and not second.pending
        assert second.grants["a.test"].used == 2
        return await store.load_day_counts([DAILY_BUDGET_KEY, "a.test"])

    counts = asyncio.run(go())
    assert counts == {DAILY_BUDGET_KEY: DayCount(DAILY_BUDGET_KEY, T0, 6),
                      "a.test": DayCount("a.test", T0, 2)}


def test_a_failed_write_keeps_its_counts_for_the_next_one() -> None:
    async def go() -> tuple[bool, dict[str, DayCount]]:
        store = FlakyStore(failures=1)
        ledger = DayCountLedger(store)
        ledger.add(DAILY_BUDGET_KEY, T0)
        await ledger.saved()              # fails: logged, the wait ends
        still_pending = ledger.pending
        ledger.add(DAILY_BUDGET_KEY, T0)
        await ledger.saved()
        return still_pending, await store.load_day_counts([DAILY_BUDGET_KEY])

    still_pending, counts = asyncio.run(go())
    assert still_pending
    assert counts[DAILY_BUDGET_KEY].used == 2  # both fetches counted, once each


def test_a_new_window_is_counted_from_zero() -> None:
    async def go() -> dict[str, DayCount]:
        store = MemoryStore()
        ledger = DayCountLedger(store)
        ledger.add("h", T0, 5)
        await ledger.saved()
        ledger.add("h", T0 + 86_400)
        await ledger.saved()
        return await store.load_day_counts(["h"])

    assert asyncio.run(go()) == {"h": DayCount("h", T0 + 86_400, 1)}
