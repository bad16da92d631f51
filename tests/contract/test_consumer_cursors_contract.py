"""Every store keeps registered consumer cursors: an unknown name has no position, a new
one starts at 0, registering again keeps the position, a position never moves backwards
(a repeated or late advance changes nothing), and it survives closing the store."""

from __future__ import annotations

from courtier.store.base import Store
from tests.contract.conftest import StoreMaker


async def test_unknown_consumer_has_no_position(store: Store) -> None:
    assert await store.consumer_position("nobody") is None


async def test_register_starts_at_zero_and_keeps_the_position(store: Store) -> None:
    assert await store.register_consumer("indexer") == 0
    assert await store.consumer_position("indexer") == 0
    assert await store.advance_consumer("indexer", 7) == 7
    assert await store.register_consumer("indexer") == 7  # registering again keeps it
    assert await store.consumer_position("indexer") == 7
    assert await store.consumer_position("other") is None  # names are independent


async def test_advance_never_moves_backwards(store: Store) -> None:
    await store.register_consumer("a")
    assert await store.advance_consumer("a", 5) == 5
    assert await store.advance_consumer("a", 3) == 5  # a late call changes nothing
    assert await store.advance_consumer("a", 5) == 5  # a repeated one neither
    assert await store.consumer_position("a") == 5
    assert await store.advance_consumer("a", 9) == 9
    assert await store.consumer_position("a") == 9


async def test_advance_registers_a_new_name(store: Store) -> None:
    assert await store.advance_consumer("late", 4) == 4
    assert await store.consumer_position("late") == 4


async def test_positions_survive_reopening(make_store: StoreMaker) -> None:
    first = make_store()
    await first.open()
    await first.register_consumer("a")
    await first.advance_consumer("a", 12)
    await first.close()
    again = make_store()
    await again.open()
    try:
        assert await again.consumer_position("a") == 12
        assert await again.register_consumer("a") == 12
    finally:
        await again.close()


async def test_consumers_are_listed_and_a_forgotten_one_is_gone(store: Store) -> None:
    """A consumer gone for good is forgotten (it no longer holds the outbox back)."""
    await store.register_consumer("a")
    await store.advance_consumer("b", 4)
    assert await store.consumers() == {"a": 0, "b": 4}
    assert await store.forget_consumer("a") is True
    assert await store.forget_consumer("a") is False  # not registered any more
    assert await store.consumers() == {"b": 4}
    assert await store.consumer_position("a") is None
