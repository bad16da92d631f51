"""A gained shard joins the refill only once its known URL keys are loaded (the
ShardKeeper with its KnownUrlsLoader, in bounded steps, one per turn of the loop).

Broken on a scratch copy: with ``_prepare_step`` leaving the loader's shards out of the
``waiting`` set, shard 3 joined the refill at the first turn with 2 of its 5 keys read
(``assert False`` from ``is_complete(3)``).
"""

from __future__ import annotations

from courtier.core.clock import VirtualClock
from courtier.core.urls import SHARD_COUNT
from courtier.crawl.intake import Intake, Scope
from courtier.crawl.known_loader import KnownUrlsLoader
from courtier.crawl.worker import Worker
from courtier.dedup.known_urls import KnownUrls
from courtier.sim.archive import DigestOnlyArchive
from courtier.sim.run import sim_config
from courtier.sim.transport import SimTransport
from courtier.sim.web import SimHost, SimWeb
from courtier.store.memory import MemoryStore
from tests.contract.test_store_contract import new

T0 = 1_700_000_000.0


async def test_a_shard_joins_the_refill_once_its_keys_are_loaded() -> None:
    clock = VirtualClock(T0)
    store = MemoryStore(clock=clock)
    rows = [new(f"http://h{s}.test/{i}", shard=s) for s in (3, 7) for i in range(5)]
    await store.add_urls(rows)
    config = sim_config()
    known = KnownUrls()
    web = SimWeb([SimHost("h.sim", ip="192.0.2.1", pages=1)])
    worker = Worker(config, store, SimTransport(web, clock, None),  # type: ignore[arg-type]
                    DigestOnlyArchive(), clock, Intake(Scope(config, []), known=known))
    keeper = worker.shard_keeper
    # two keys a read and a turn: shard 3 needs three turns, shard 7 three more
    keeper.known_loader = KnownUrlsLoader(store, known, keys_per_read=2, keys_per_turn=2)
    await keeper.acquire_alone(clock.now())
    assert keeper.shards == [] and keeper.rebuilding
    turns = 0
    while keeper.rebuilding and turns < 20:
        await keeper.apply_changes()
        turns += 1
        for shard in (3, 7):  # in the refill ⇒ its keys are all in memory
            if shard in keeper.shards:
                assert known.is_complete(shard)
                assert all(known.knows(r.url_key, shard) for r in rows if r.shard == shard)
            else:
                assert not known.is_complete(shard)
        if turns == 1:
            assert 3 not in keeper.shards and 7 not in keeper.shards
            assert 0 in keeper.shards  # an empty shard before them is complete at once
    assert sorted(keeper.shards) == list(range(SHARD_COUNT))
    assert turns >= 5  # the load took bounded steps, one per turn
