"""Contract of the refresh-plan methods (values, host tiers, planned load by tier) ×3 stores."""

from __future__ import annotations

from courtier.store.base import UNPLANNED_TIER, HostTierRecord, Store
from tests.contract.conftest import T0, StoreMaker
from tests.contract.test_store_contract import done, key, new


async def test_set_values_changes_known_rows_only_and_url_values_reads_them(
        store: Store) -> None:
    await store.add_urls([new("http://a.test/1"), new("http://a.test/2")])
    changed = await store.set_values([(key("http://a.test/1"), 7.5),
                                      (key("http://a.test/unknown"), 3.0)])
    assert changed == 1
    values = await store.url_values([key("http://a.test/1"), key("http://a.test/2"),
                                     key("http://a.test/unknown")])
    assert values == {key("http://a.test/1"): 7.5}
    row = await store.get_url(key("http://a.test/1"))
    assert row is not None and row["value"] == 7.5 and row["version"] == 0
    assert await store.set_values([(key("http://a.test/1"), None)]) == 1
    assert await store.url_values([key("http://a.test/1")]) == {}


async def test_refilled_rows_carry_the_value_another_store_object_set(
        make_store: StoreMaker) -> None:
    """The refill's rows carry each URL's stored value (``DueUrl.value``; planning asks
    no look-up of its own): a value set through another store object (another connection:
    the API of another worker) before a refill is in that refill's rows."""
    setter, worker = make_store(), make_store()
    await setter.open()
    await worker.open()
    try:
        await setter.add_urls([new("http://a.test/1"), new("http://a.test/2"),
                               new("http://a.test/3")])
        await setter.set_values([(key("http://a.test/1"), 7.5)])
        read = await worker.read_due([1], T0, 10, 10)
        assert {d.url: d.value for d in read} == {
            "http://a.test/1": 7.5, "http://a.test/2": None, "http://a.test/3": None}
        await setter.set_values([(key("http://a.test/2"), 0.25)])
        marked = await worker.load_due([1], T0, 10, 10)
        assert {d.url: d.value for d in marked} == {
            "http://a.test/1": 7.5, "http://a.test/2": 0.25, "http://a.test/3": None}
    finally:
        await worker.close()
        await setter.close()


async def test_set_values_leaves_the_schedule_alone(store: Store) -> None:
    await store.add_urls([new("http://a.test/1", due=T0 + 50)])
    await store.set_values([(key("http://a.test/1"), 2.0)])
    assert await store.load_due([1], T0 + 10, 10, 10) == []
    due = await store.load_due([1], T0 + 60, 10, 10)
    assert [d.url for d in due] == ["http://a.test/1"]


async def test_commit_writes_value_and_tier_and_none_keeps_them(store: Store) -> None:
    await store.add_urls([new("http://a.test/1")])
    await store.acquire_shards("me", [1], T0, 60)
    await store.load_due([1], T0, 10, 10)
    await store.commit([done("http://a.test/1", epoch=1, value=1.25, tier="hot")])
    row = await store.get_url(key("http://a.test/1"))
    assert row is not None and (row["value"], row["tier"]) == (1.25, "hot")
    again = await store.load_due([1], T0 + 3600, 10, 10)
    assert [d.value for d in again] == [1.25]  # the next refill's row carries it
    await store.commit([done("http://a.test/1", version=1, epoch=1)])
    row = await store.get_url(key("http://a.test/1"))
    assert row is not None and (row["value"], row["tier"], row["version"]) == (1.25, "hot", 2)


async def test_a_stale_commit_writes_no_value_or_tier(store: Store) -> None:
    await store.add_urls([new("http://a.test/1")])
    await store.acquire_shards("me", [1], T0, 60)
    result = await store.commit([done("http://a.test/1", version=3, epoch=1, value=9.0,
                                      tier="hot")])
    assert result.stale == 1
    row = await store.get_url(key("http://a.test/1"))
    assert row is not None and row["value"] is None and row["tier"] is None


async def test_host_tiers_upsert_read_and_clear(store: Store) -> None:
    record = HostTierRecord("http://news.test", tier="hot", min_interval=300.0)
    await store.set_host_tier(record)
    got = await store.host_tiers(["http://news.test", "http://other.test"])
    assert got == {"http://news.test": record}
    bounds = HostTierRecord("http://news.test", min_interval=60.0, max_interval=600.0,
                            value_factor=2.0)
    await store.set_host_tier(bounds)
    assert await store.host_tiers(["http://news.test"]) == {"http://news.test": bounds}
    await store.set_host_tier(HostTierRecord("http://news.test"))
    assert await store.host_tiers(["http://news.test"]) == {}


async def test_tier_counts_group_the_planned_load(store: Store) -> None:
    await store.add_urls([new("http://a.test/1"), new("http://a.test/2"),
                          new("http://a.test/3", due=T0 + 5 * 86_400),
                          new("http://b.test/1", shard=2)])
    await store.acquire_shards("me", [1, 2], T0, 60)
    await store.commit([done("http://a.test/1", epoch=1, tier="hot")])  # due T0 + 3600
    counts = await store.tier_counts([1], T0 + 86_400)
    assert counts == {"hot": 1, UNPLANNED_TIER: 1}
    assert await store.tier_counts([1, 2], T0 + 86_400) == {"hot": 1, UNPLANNED_TIER: 2}
    assert await store.tier_counts([1], T0 + 10 * 86_400) == {"hot": 1, UNPLANNED_TIER: 2}
    assert await store.tier_counts([], T0 + 86_400) == {}
