"""Contract: shard leases, epochs, fencing of every write path, membership and the
cluster view (store/cluster.py), against every store.

Times: lease calls get ``await store.store_now()``; PostgreSQL ignores it and stamps
its own clock. A lease of 0 s has expired by the next call in every store; 3600 s
is still held.
"""

from __future__ import annotations

import asyncio

from courtier.cluster.membership import plan_shards
from courtier.store.base import Store, UrlState
from tests.contract.conftest import T0, StoreMaker
from tests.contract.test_store_contract import done, key, new, state_of

HELD = 3600.0
EXPIRED = 0.0


async def take(store: Store, owner: str, shards: list[int], lease: float = HELD
               ) -> dict[int, int]:
    return await store.acquire_shards(owner, shards, await store.store_now(), lease)


async def handovers(store: Store) -> dict[str, int]:
    return (await store.cluster_view([])).handovers


async def test_reacquiring_a_held_lease_keeps_the_epoch(store: Store) -> None:
    assert await take(store, "A", [1, 2]) == {1: 1, 2: 1}
    assert await take(store, "A", [1, 2]) == {1: 1, 2: 1}
    assert await take(store, "B", [1, 2, 3]) == {3: 1}  # held by A unexpired: refused
    assert await handovers(store) == {"graceful": 0, "takeover": 0}


async def test_reacquiring_an_expired_lease_nobody_took_keeps_the_epoch(store: Store) -> None:
    assert await take(store, "A", [1], EXPIRED) == {1: 1}
    assert await take(store, "A", [1]) == {1: 1}
    assert await store.renew_shards("A", {1: 1}, await store.store_now(), HELD) == {1}
    assert await handovers(store) == {"graceful": 0, "takeover": 0}


async def test_takeover_of_an_expired_lease_bumps_the_epoch_and_is_counted(store: Store) -> None:
    await take(store, "A", [1, 2], EXPIRED)
    assert await take(store, "B", [1]) == {1: 2}
    assert await handovers(store) == {"graceful": 0, "takeover": 1}
    now = await store.store_now()
    assert await store.renew_shards("A", {1: 1, 2: 1}, now, HELD) == {2}
    assert await take(store, "A", [1]) == {}  # B holds it now
    assert await store.renew_shards("B", {1: 1}, now, HELD) == set()  # wrong epoch
    assert await store.renew_shards("B", {1: 2}, now, HELD) == {1}


async def test_release_bumps_the_epoch_and_a_new_owner_counts_a_graceful_move(
        store: Store) -> None:
    await take(store, "A", [1, 2, 3])
    await store.release_shards("B", [1])  # not B's: nothing happens
    assert await take(store, "B", [1]) == {}
    await store.release_shards("A", [1, 2])
    assert await take(store, "B", [1]) == {1: 2}
    assert await take(store, "A", [2]) == {2: 2}  # its own release: no handover
    assert await handovers(store) == {"graceful": 1, "takeover": 0}
    await store.release_shards("A", [3], epochs={3: 7})  # wrong epoch: kept
    assert await take(store, "B", [3]) == {}
    await store.release_shards("A", [3], epochs={3: 1})
    assert await take(store, "B", [3]) == {3: 2}


async def test_every_write_of_a_deposed_owner_is_rejected(store: Store) -> None:
    urls = [new(f"http://a.test/{i}") for i in range(4)]
    await store.add_urls(urls)
    old = await take(store, "A", [1], EXPIRED)
    leased = await store.load_due([1], T0, 2, 10, epochs=old)
    assert len(leased) == 2
    new_epochs = await take(store, "B", [1])
    assert new_epochs == {1: 2}
    # refill, release, reset and shard release of the old term change nothing
    assert await store.load_due([1], T0, 10, 10, epochs=old) == []
    assert await store.release([(d.url_key, T0) for d in leased], epochs=old) == 0
    assert await store.reset_scheduled([1], epochs=old) == 0
    await store.release_shards("A", [1], epochs=old)
    for due in leased:
        assert await state_of(store, due.url) == UrlState.SCHEDULED
    commit = await store.commit([done(leased[0].url, epoch=1)])
    assert (commit.applied, commit.stale) == (0, 1)
    # a shard absent from epochs is never touched
    assert await store.load_due([1], T0, 10, 10, epochs={}) == []
    # the new owner's writes go through
    assert await store.reset_scheduled([1], epochs=new_epochs) == 2
    rest = await store.load_due([1], T0, 10, 10, epochs=new_epochs)
    assert len(rest) == 4
    assert await store.release([(rest[0].url_key, T0)], epochs=new_epochs) == 1
    assert (await store.commit([done(rest[1].url, epoch=2)])).applied == 1
    assert await store.read_events(0, 10) != []


async def test_a_released_term_is_fenced_before_anyone_takes_the_shard(store: Store) -> None:
    await store.add_urls([new("http://a.test/1"), new("http://a.test/2")])
    term = await take(store, "A", [1])
    (first, second) = await store.load_due([1], T0, 10, 10, epochs=term)
    assert (await store.commit([done(first.url, epoch=1)])).applied == 1
    await store.release_shards("A", [1], epochs=term)
    assert await state_of(store, second.url) == UrlState.QUEUED
    late = await store.commit([done(second.url, epoch=1)])
    assert (late.applied, late.stale) == (0, 1)
    assert await store.load_due([1], T0, 10, 10, epochs=term) == []


async def test_fenced_release_keeps_rows_of_other_shards(store: Store) -> None:
    await store.add_urls([new("http://a.test/1", shard=1), new("http://b.test/1", shard=2)])
    mine = await take(store, "A", [1, 2])
    due = await store.load_due([1, 2], T0, 10, 10, epochs=mine)
    assert len(due) == 2
    # only shard 1's epoch given: the row of shard 2 stays SCHEDULED
    assert await store.release([(d.url_key, T0) for d in due], epochs={1: mine[1]}) == 1
    assert await state_of(store, "http://b.test/1", 2) == UrlState.SCHEDULED


async def test_a_postponement_is_fenced_by_the_epoch_and_the_version(store: Store) -> None:
    """``postpone`` (hand-backs of rows read without marking) moves only QUEUED rows of
    shards held at the given epoch, at the version given. Seen red on the memory store
    with its epoch check removed (the deposed owner's postponement applied: 2 != 1)."""
    await store.add_urls([new("http://a.test/1", shard=1), new("http://b.test/1", shard=2)])
    old = await take(store, "A", [1, 2], EXPIRED)
    read = await store.read_due([1, 2], T0, 10, 10, epochs=old)
    assert len(read) == 2
    mine = await take(store, "B", [1])  # shard 1 taken over: A's term there is over
    later = T0 + 3600
    items = [(d.url_key, d.version, later) for d in read]
    assert await store.postpone(items, epochs=old) == 1  # shard 2's row only
    assert await store.read_due([1, 2], T0, 10, 10, epochs={**old, **mine}) == [
        d for d in read if d.shard == 1]
    assert await store.postpone([(read[0].url_key, read[0].version + 1, later)],
                                epochs={**old, **mine}) == 0  # not that version
    assert await store.postpone([(d.url_key, d.version, later) for d in read if d.shard == 1],
                                epochs=mine) == 1
    assert await store.read_due([1, 2], T0, 10, 10, epochs={**old, **mine}) == []


async def test_heartbeat_registers_refreshes_and_leave_removes(store: Store) -> None:
    first = await store.heartbeat("w1", 1.0, {"api": "127.0.0.1:8001"},
                                  await store.store_now())
    await store.heartbeat("w2", 2.0, {}, await store.store_now())
    again = await store.heartbeat("w1", 3.0, {"api": "127.0.0.1:9001", "pid": 7},
                                  await store.store_now())
    assert again >= first
    view = await store.cluster_view()
    assert [w.worker_id for w in view.workers] == ["w1", "w2"]
    w1 = view.workers[0]
    assert (w1.weight, w1.info, w1.started_at, w1.heartbeat_at) == (
        3.0, {"api": "127.0.0.1:9001", "pid": 7}, first, again)
    assert view.now >= again
    await store.leave("w1")
    await store.leave("nobody")
    assert [w.worker_id for w in (await store.cluster_view()).workers] == ["w2"]


async def test_prune_workers_forgets_silent_workers_that_hold_no_live_lease(store: Store) -> None:
    for worker in ("holder", "silent"):
        await store.heartbeat(worker, 1.0, {}, await store.store_now())
    assert await store.acquire_shards("holder", [3], await store.store_now(), 3600) == {3: 1}
    # nobody is silent for an hour yet
    assert await store.prune_workers(3600.0, await store.store_now()) == []
    # both silent "for longer than 0 s": the one holding a live lease stays
    later = await store.store_now() + 1.0  # memory/SQLite: the caller's clock
    assert await store.prune_workers(0.0, later) == ["silent"]
    assert [w.worker_id for w in (await store.cluster_view()).workers] == ["holder"]
    assert await store.prune_workers(0.0, later) == []


async def test_cluster_view_reports_leases_and_feeds_the_planner(store: Store) -> None:
    shards = list(range(16))
    for worker in ("A", "B"):
        await store.heartbeat(worker, 1.0, {}, await store.store_now())
    view = await store.cluster_view()
    plan_a = plan_shards("A", view.worker_views(), view.lease_views(), shards, view.now, 60)
    held = await take(store, "A", plan_a.acquire)
    assert sorted(held) == plan_a.acquire and set(held.values()) == {1}
    view = await store.cluster_view()
    assert [lease.shard for lease in view.leases] == plan_a.acquire
    assert all(lease.owner == "A" and lease.expires_at > view.now
               and 0 < lease.acquired_at <= view.now for lease in view.leases)
    only = await store.cluster_view([plan_a.acquire[0], 999])
    assert [lease.shard for lease in only.leases] == [plan_a.acquire[0]]
    plan_b = plan_shards("B", view.worker_views(), view.lease_views(), shards, view.now, 60)
    assert plan_b.wait == [] and set(plan_b.acquire).isdisjoint(plan_a.acquire)
    assert sorted(plan_a.acquire + plan_b.acquire) == shards
    # A leaves: B's plan now wants A's shards but must wait for the leases
    await store.leave("A")
    view = await store.cluster_view()
    plan_b = plan_shards("B", view.worker_views(), view.lease_views(), shards, view.now, 60)
    assert plan_b.wait == plan_a.acquire


async def test_lease_age_restarts_only_with_a_new_term(store: Store) -> None:
    await take(store, "A", [1], EXPIRED)
    (lease,) = (await store.cluster_view([1])).leases
    await take(store, "A", [1])
    (kept,) = (await store.cluster_view([1])).leases
    assert kept.acquired_at == lease.acquired_at and kept.epoch == 1
    await store.release_shards("A", [1])
    (free,) = (await store.cluster_view([1])).leases
    assert (free.owner, free.epoch) == (None, 2)


async def test_epoch_fenced_refill_of_shards_never_leased(store: Store) -> None:
    # a shard nobody ever leased has epoch 0 (single-process crawls commit with it)
    await store.add_urls([new("http://a.test/1")])
    assert await store.load_due([1], T0, 10, 10, epochs={1: 1}) == []
    (due,) = await store.load_due([1], T0, 10, 10, epochs={1: 0})
    assert due.url_key == key("http://a.test/1")


async def test_concurrent_takeovers_give_each_shard_one_owner(make_store: StoreMaker) -> None:
    stores = [make_store() for _ in range(4)]
    for s in stores:
        await s.open()
    try:
        shards = list(range(16))
        await take(stores[0], "dead", shards, EXPIRED)
        won = await asyncio.wait_for(asyncio.gather(
            *(take(s, f"w{n}", shards if n % 2 else shards[::-1])
              for n, s in enumerate(stores))), timeout=60)
        owners = [shard for got in won for shard in got]
        assert sorted(owners) == shards  # every shard taken, none twice
        assert {epoch for got in won for epoch in got.values()} == {2}
        view = await stores[0].cluster_view(shards)
        assert {lease.shard: lease.owner for lease in view.leases} == {
            shard: f"w{n}" for n, got in enumerate(won) for shard in got}
        assert view.handovers == {"graceful": 0, "takeover": 16}
    finally:
        for s in stores:
            await s.close()


async def test_the_read_only_refill_is_fenced_and_a_new_owner_reads_what_the_old_one_read(
        store: Store) -> None:
    """``read_due`` marks nothing: what a dead owner read is the new owner's to read again,
    and a deposed owner's read (a stale epoch, or a shard absent from ``epochs``) returns
    nothing. Seen red with the epoch filter of PostgreSQL's ``read_due`` removed (the stale
    read returned 3 rows) and with the memory store's read marking its rows SCHEDULED
    (their states read [1, 1, 1])."""
    urls = [new(f"http://a.test/{i}") for i in range(3)]
    await store.add_urls(urls)
    old = await take(store, "A", [1], EXPIRED)
    read = await store.read_due([1], T0, 10, 10, epochs=old)
    assert sorted(d.url_key for d in read) == sorted(u.url_key for u in urls)
    assert [await state_of(store, u.url) for u in urls] == [UrlState.QUEUED] * 3
    new_epochs = await take(store, "B", [1])  # A's lease expired: a takeover
    assert await store.read_due([1], T0, 10, 10, epochs=old) == []
    assert await store.read_due([1], T0, 10, 10, epochs={}) == []
    again = await store.read_due([1], T0, 10, 10, epochs=new_epochs)
    assert [d.url_key for d in again] == [d.url_key for d in read]
    assert (await store.commit([done(again[0].url, epoch=new_epochs[1])])).applied == 1
    assert len(await store.read_due([1], T0, 10, 10, epochs=new_epochs)) == 2


async def test_a_heartbeat_with_a_lease_renews_every_shard_its_worker_owns(store: Store) -> None:
    """A coordinator round's heartbeat is its renewal (``lease_seconds``): every shard the
    worker owns, live or expired but not taken, is held again at its epoch, and another
    worker's take is refused; a heartbeat without it renews nothing. Seen red with the
    memory store's heartbeat ignoring ``lease_seconds`` (the view showed A's leases
    expired)."""
    assert await take(store, "A", [1, 2], EXPIRED) == {1: 1, 2: 1}
    await store.heartbeat("A", 1.0, {}, await store.store_now(), HELD)
    view = await store.cluster_view([1, 2])
    assert [(lease.owner, lease.epoch) for lease in view.leases] == [("A", 1), ("A", 1)]
    assert all(lease.expires_at > view.now for lease in view.leases)
    assert await take(store, "B", [1, 2]) == {}
    assert await take(store, "C", [3], EXPIRED) == {3: 1}
    await store.heartbeat("C", 1.0, {}, await store.store_now())
    assert await take(store, "B", [3]) == {3: 2}  # C's heartbeat renewed nothing
    assert await handovers(store) == {"graceful": 0, "takeover": 1}


async def test_prune_forgets_the_leases_of_owners_long_dead_with_their_membership(
        store: Store) -> None:
    """``prune_workers`` deletes the lease of an owner silent for the age given once it
    has ended (a worker's, or one renewed without heartbeats), so the lease rows of dead
    workers do not pile up; the shards they still name are no different (takeable). A
    live lease stays, and so does its owner's row. Seen red with the memory store's
    prune leaving its lease entries alone (A's shard still showed its old expiry)."""
    now = await store.store_now()
    await store.heartbeat("A", 1.0, {}, now, EXPIRED)
    assert await take(store, "A", [1], EXPIRED) == {1: 1}
    assert await take(store, "single", [2], EXPIRED) == {2: 1}  # no heartbeat: a lease only
    assert await take(store, "live", [3]) == {3: 1}
    before = {lease.shard: lease.expires_at for lease in (await store.cluster_view()).leases}
    assert before[1] > 0 and before[2] > 0
    later = await store.store_now() + 1.0
    assert await store.prune_workers(0.0, later) == ["A"]  # members only
    view = await store.cluster_view()
    assert {lease.shard: (lease.owner, lease.expires_at > 0) for lease in view.leases} == {
        1: ("A", False), 2: ("single", False), 3: ("live", True)}
    assert view.workers == []
    assert await take(store, "B", [1, 2, 3]) == {1: 2, 2: 2}
    assert await handovers(store) == {"graceful": 0, "takeover": 2}


async def test_leave_keeps_a_live_lease_and_a_new_heartbeat_starts_afresh(store: Store) -> None:
    """After ``leave`` the worker is no member, but its unreleased shards stay its own
    until its lease ends; a later heartbeat registers it again with a new ``started_at``.
    Seen red with PostgreSQL's ``leave`` deleting the row whatever its lease (A's shard
    showed an expiry of 0)."""
    first = await store.heartbeat("A", 1.0, {}, await store.store_now(), HELD)
    assert await take(store, "A", [1]) == {1: 1}
    await store.leave("A")
    view = await store.cluster_view([1])
    assert view.workers == [] and view.leases[0].expires_at > view.now
    assert await take(store, "B", [1]) == {}
    again = await store.heartbeat("A", 1.0, {}, await store.store_now() + 1.0)
    (record,) = (await store.cluster_view()).workers
    assert record.started_at == again > first
