"""Intake edges every store must agree on: a key twice in one batch stores its first
occurrence, counts once, and the host queue sees only the stored row."""

from __future__ import annotations

from courtier.store.base import Store
from tests.contract.conftest import T0
from tests.contract.test_refill_contract import _assert_queue_exact
from tests.contract.test_store_contract import key, new


async def test_a_key_twice_in_one_batch_stores_its_first_occurrence(store: Store) -> None:
    batch = [
        new("http://a.test/later", priority=1, due=T0 + 50),
        new("http://a.test/x", priority=2, due=T0 + 20),
        new("http://a.test/x", priority=5, due=T0 + 1),  # same key: ignored
        new("http://b.test/y", priority=0, due=T0 + 7),
        new("http://b.test/y", priority=3, due=T0 + 9),  # same key: ignored
    ]
    assert await store.add_urls(batch) == 3
    row = await store.get_url(key("http://a.test/x"))
    assert row is not None
    assert (row["priority"], row["next_fetch_at"]) == (2, T0 + 20)
    # the queue saw only the stored rows: a.test's best level is 2, due at T0 + 20
    due = await store.load_due([1], T0 + 100, 10, 10)
    assert [(d.url, d.priority) for d in due] == [
        ("http://a.test/x", 2), ("http://a.test/later", 1), ("http://b.test/y", 0)]
    await _assert_queue_exact(store)

