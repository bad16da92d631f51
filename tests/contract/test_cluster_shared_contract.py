"""Contract: state that crosses shards — the shared daily budget, per-IP slots, host
politeness clocks and scope rules (store/cluster.py) — against every store.

Concurrency tests open several store objects over the same backing data (separate
connections / pools for SQLite and PostgreSQL) and call them at once; totals are
checked in the store afterwards.
"""

from __future__ import annotations

import asyncio
import math

import pytest

from courtier.core.errors import StoreError
from courtier.store.base import DAILY_BUDGET_KEY, DayCount, Store
from courtier.store.cluster import DayReservation, HostClock, ScopeRule
from tests.contract.conftest import T0, StoreMaker

DAY = 86_400.0


async def opened(make_store: StoreMaker, n: int) -> list[Store]:
    stores = [make_store() for _ in range(n)]
    for s in stores:
        await s.open()
    return stores


async def close_all(stores: list[Store]) -> None:
    for s in stores:
        await s.close()


# -- the shared daily budget ------------------------------------------------------------


async def test_reserve_grants_up_to_the_limit_and_adds_up(store: Store) -> None:
    grants = await store.reserve_day_counts([
        DayReservation(DAILY_BUDGET_KEY, T0, 3, limit=5),
        DayReservation("a.test", T0, 2)])
    assert grants[DAILY_BUDGET_KEY].granted == 3 and grants["a.test"].granted == 2
    again = await store.reserve_day_counts([DayReservation(DAILY_BUDGET_KEY, T0, 4, limit=5)])
    assert (again["*"].granted, again["*"].used, again["*"].day_start) == (2, 5, T0)
    full = await store.reserve_day_counts([DayReservation(DAILY_BUDGET_KEY, T0, 1, limit=5)])
    assert (full["*"].granted, full["*"].used) == (0, 5)
    back = await store.reserve_day_counts([DayReservation(DAILY_BUDGET_KEY, T0, -9)])
    assert (back["*"].granted, back["*"].used) == (-5, 0)  # never below 0
    assert await store.load_day_counts(["*", "a.test", "b.test"]) == {
        "*": DayCount("*", T0, 0), "a.test": DayCount("a.test", T0, 2)}
    assert await store.reserve_day_counts([]) == {}


async def test_reserve_keeps_the_stored_window_until_a_day_has_passed(store: Store) -> None:
    await store.reserve_day_counts([DayReservation("h", T0, 4)])
    # a caller whose window began a little later counts in the stored one
    late = await store.reserve_day_counts([DayReservation("h", T0 + 10, 1, limit=5)])
    assert (late["h"].day_start, late["h"].used, late["h"].granted) == (T0, 5, 1)
    # and so does a caller still in an older window
    old = await store.reserve_day_counts([DayReservation("h", T0 - DAY, 1)])
    assert (old["h"].day_start, old["h"].used) == (T0, 6)
    # 24 h after the stored start: a new window
    fresh = await store.reserve_day_counts([DayReservation("h", T0 + DAY, 2, limit=5)])
    assert (fresh["h"].day_start, fresh["h"].used, fresh["h"].granted) == (T0 + DAY, 2, 2)


async def test_reservations_of_one_key_in_a_call_apply_in_order(store: Store) -> None:
    grants = await store.reserve_day_counts([DayReservation("h", T0, 3, limit=4),
                                             DayReservation("h", T0, 3, limit=4)])
    assert (grants["h"].granted, grants["h"].used) == (1, 4)


async def test_counts_survive_reopening(make_store: StoreMaker) -> None:
    (first,) = await opened(make_store, 1)
    await first.reserve_day_counts([DayReservation("*", T0, 7)])
    await first.close()
    (second,) = await opened(make_store, 1)
    try:
        assert await second.load_day_counts(["*"]) == {"*": DayCount("*", T0, 7)}
        many = [DayReservation(f"http://h{i}.test", T0, i) for i in range(1200)]
        await second.reserve_day_counts(many)
        loaded = await second.load_day_counts([r.key for r in many])
        assert len(loaded) == 1200 and loaded["http://h1199.test"].used == 1199
    finally:
        await second.close()


async def test_concurrent_reservations_give_exact_totals_and_never_pass_the_limit(
        make_store: StoreMaker) -> None:
    stores = await opened(make_store, 4)
    try:
        async def worker(s: Store, n: int) -> tuple[int, int]:
            capped = uncapped = 0
            for i in range(25):
                # keys in both orders, so lock ordering matters
                asks = [DayReservation("cap", T0, 1, limit=37),
                        DayReservation("free", T0, 1)]
                got = await s.reserve_day_counts(asks if (i + n) % 2 else asks[::-1])
                capped += got["cap"].granted
                uncapped += got["free"].granted
            return capped, uncapped

        results = await asyncio.wait_for(
            asyncio.gather(*(worker(s, n) for n, s in enumerate(stores))), timeout=60)
        assert sum(c for c, _ in results) == 37
        assert sum(u for _, u in results) == 100
        counts = await stores[0].load_day_counts(["cap", "free"])
        assert (counts["cap"].used, counts["free"].used) == (37, 100)
    finally:
        await close_all(stores)


# -- per-IP slots -----------------------------------------------------------------------


async def test_ip_slots_cap_concurrency_and_release_frees_one(store: Store) -> None:
    now = await store.store_now()
    a = await store.acquire_ip_slot("192.0.2.1", "A", 2, 0.0, 3600, now)
    b = await store.acquire_ip_slot("192.0.2.1", "B", 2, 0.0, 3600, now)
    c = await store.acquire_ip_slot("192.0.2.1", "C", 2, 0.0, 3600, now)
    assert a.granted and b.granted and not c.granted and a.token != b.token
    assert c.retry_at >= a.expires_at - 1e-6 and a.expires_at >= a.now + 3600 - 1e-6
    other = await store.acquire_ip_slot("192.0.2.2", "C", 1, 0.0, 3600, now)
    assert other.granted  # another address has its own slots
    await store.release_ip_slot("192.0.2.1", a.token)
    await store.release_ip_slot("192.0.2.1", 999_999)  # unknown: ignored
    assert (await store.acquire_ip_slot("192.0.2.1", "C", 2, 0.0, 3600,
                                        await store.store_now())).granted


async def test_release_ip_slots_of_frees_one_owners_slots_of_every_address(store: Store) -> None:
    now = await store.store_now()
    for ip in ("192.0.2.21", "192.0.2.21", "192.0.2.22"):
        assert (await store.acquire_ip_slot(ip, "crashed", 2, 0.0, 3600, now)).granted
    assert (await store.acquire_ip_slot("192.0.2.22", "other", 2, 0.0, 3600, now)).granted
    assert await store.release_ip_slots_of("crashed") == 3
    assert await store.release_ip_slots_of("crashed") == 0
    now = await store.store_now()
    assert (await store.acquire_ip_slot("192.0.2.21", "new", 2, 0.0, 3600, now)).granted
    assert (await store.acquire_ip_slot("192.0.2.21", "new", 2, 0.0, 3600, now)).granted
    assert (await store.acquire_ip_slot("192.0.2.22", "new", 2, 0.0, 3600, now)).granted
    # the other owner's slot is still held: the address is full again
    assert not (await store.acquire_ip_slot("192.0.2.22", "new", 2, 0.0, 3600, now)).granted


async def test_ip_slot_gap_refuses_until_it_has_passed(store: Store) -> None:
    gap = 2.0  # longer than one call takes on a loaded machine (Citus: ~0.2 s at load 23)
    first = await store.acquire_ip_slot("192.0.2.9", "A", 8, gap, 3600,
                                        await store.store_now())
    assert first.granted
    early = await store.acquire_ip_slot("192.0.2.9", "B", 8, gap, 3600, first.now)
    assert not early.granted and early.retry_at == pytest.approx(first.now + gap)
    for _ in range(50_000):  # bounded: PostgreSQL's clock passes the gap on its own
        later = await store.acquire_ip_slot("192.0.2.9", "B", 8, gap, 3600,
                                            max(early.retry_at, await store.store_now()))
        if later.granted:
            break
    assert later.granted and later.now >= first.now + gap - 1e-6


async def test_expired_ip_slots_are_dropped(store: Store) -> None:
    held = await store.acquire_ip_slot("192.0.2.3", "A", 1, 0.0, 0.0,
                                       await store.store_now())
    assert held.granted
    again = await store.acquire_ip_slot("192.0.2.3", "B", 1, 0.0, 3600,
                                        await store.store_now())
    assert again.granted  # the 0 s slot had expired


async def test_concurrent_ip_slot_requests_never_exceed_the_cap(make_store: StoreMaker) -> None:
    stores = await opened(make_store, 4)
    try:
        async def ask(s: Store, owner: str) -> int:
            got = 0
            for _ in range(10):
                grant = await s.acquire_ip_slot("198.51.100.7", owner, 3, 0.0, 3600,
                                                await s.store_now())
                got += grant.granted
            return got

        granted = await asyncio.wait_for(asyncio.gather(
            *(ask(s, f"w{n}") for n, s in enumerate(stores))), timeout=60)
        assert sum(granted) == 3
        # with a long gap, only one of many simultaneous asks wins
        now = await stores[0].store_now()
        wins = await asyncio.wait_for(asyncio.gather(*(
            s.acquire_ip_slot("198.51.100.8", f"w{n}", 10, 3600.0, 3600, now)
            for n, s in enumerate(stores * 3))), timeout=60)
        assert sum(w.granted for w in wins) == 1
    finally:
        await close_all(stores)


# -- host politeness clocks -------------------------------------------------------------


async def test_host_clocks_round_trip_exactly(store: Store) -> None:
    before = await store.store_now()
    full = HostClock("a.test", 1, last_start_at=T0 + 1.25, last_end_at=T0 + 2.5,
                     next_start_at=T0 + 12.5, delay_in_force=10.0, crawl_delay=7.0,
                     adaptive_delay=3.5, throttle_delay=10.0, throttle_events=2, failures=1,
                     backoff_until=T0 + 30, retry_after_until=T0 + 60, in_flight=1)
    bare = HostClock("b.test", 2)
    await store.save_host_clocks([full, bare])
    loaded = await store.load_host_clocks(["a.test", "b.test", "c.test"])
    assert set(loaded) == {"a.test", "b.test"}
    got = loaded["a.test"]
    assert got.saved_at >= before
    fields = ("last_start_at", "last_end_at", "next_start_at", "delay_in_force",
              "crawl_delay", "adaptive_delay", "throttle_delay", "throttle_events",
              "failures", "backoff_until", "retry_after_until", "in_flight")
    assert all(getattr(got, f) == getattr(full, f) for f in fields)
    assert loaded["b.test"].next_start_at is None and loaded["b.test"].delay_in_force == 0
    # a later save replaces the clock
    await store.save_host_clocks([HostClock("a.test", 1, next_start_at=T0 + 99)])
    replaced = (await store.load_host_clocks(["a.test"]))["a.test"]
    assert replaced.next_start_at == T0 + 99 and replaced.backoff_until is None
    assert await store.load_host_clocks([]) == {}
    assert not math.isnan(replaced.saved_at)


# -- scope rules ------------------------------------------------------------------------


async def test_scope_rules_are_shared_and_polled_by_id(make_store: StoreMaker) -> None:
    one, two = await opened(make_store, 2)
    try:
        added = await one.add_scope_rules([ScopeRule("host", "a.test"),
                                           ScopeRule("domain", "b.test"),
                                           ScopeRule("host", "a.test")])
        assert added == 2
        seen = await two.scope_rules()
        assert [(r.kind, r.value) for r in seen] == [("host", "a.test"), ("domain", "b.test")]
        assert await two.add_scope_rules([ScopeRule("exclude", r"\.pdf$"),
                                          ScopeRule("host", "a.test")]) == 1
        newer = await one.scope_rules(after=seen[-1].id)
        assert [(r.kind, r.value) for r in newer] == [("exclude", r"\.pdf$")]
        with pytest.raises(StoreError, match="unknown scope rule kind"):
            await one.add_scope_rules([ScopeRule("everything", "x")])
        with pytest.raises(StoreError, match="not a regular expression"):
            await one.add_scope_rules([ScopeRule("host", "c.test"), ScopeRule("include", "([")])
        assert [r.value for r in await two.scope_rules(after=newer[-1].id)] == []
    finally:
        await close_all([one, two])
