"""Shard planning for one worker: acquire, keep, hand over, wait; self-fencing."""

from __future__ import annotations

import pytest

from courtier.cluster.membership import (
    LeaseView,
    WorkerView,
    fence_deadline,
    live_others,
    live_weights,
    plan_shards,
)
from courtier.cluster.rendezvous import target_owners

NOW = 1_000_000.0
TTL = 30.0
SHARDS = range(256)


def alive(*ids: str) -> list[WorkerView]:
    return [WorkerView(i, 1.0, NOW - 1) for i in ids]


def held(owners: dict[int, str], expires: float = NOW + 20, epoch: int = 3) -> list[LeaseView]:
    return [LeaseView(s, o, epoch, expires) for s, o in owners.items()]


def test_a_lone_worker_acquires_everything() -> None:
    plan = plan_shards("a", alive("a"), [], SHARDS, NOW, TTL)
    assert plan.acquire == list(SHARDS)
    assert plan.keep == plan.handover == plan.wait == []


def test_stale_heartbeats_do_not_count() -> None:
    workers = [WorkerView("a", 1.0, NOW - 1), WorkerView("dead", 1.0, NOW - TTL - 1)]
    assert live_weights(workers, NOW, TTL) == {"a": 1.0}
    plan = plan_shards("a", workers, [], SHARDS, NOW, TTL)
    assert plan.acquire == list(SHARDS)


def test_newcomer_waits_and_old_owner_hands_over() -> None:
    everything = {s: "a" for s in SHARDS}
    leases = held(everything)
    workers = alive("a", "b")
    new_targets = target_owners(SHARDS, {"a": 1.0, "b": 1.0})
    to_b = sorted(s for s, o in new_targets.items() if o == "b")
    assert to_b  # some shards must move

    plan_a = plan_shards("a", workers, leases, SHARDS, NOW, TTL)
    plan_b = plan_shards("b", workers, leases, SHARDS, NOW, TTL)
    assert plan_a.handover == to_b
    assert sorted(plan_a.keep + plan_a.handover) == list(SHARDS)
    assert plan_b.wait == to_b and plan_b.acquire == [] and plan_b.keep == []

    # a released them (owner kept, expiry now): b acquires exactly those.
    released = held({s: "a" for s in SHARDS if s not in to_b}) + [
        LeaseView(s, "a", 3, NOW) for s in to_b
    ]
    plan_b = plan_shards("b", workers, released, SHARDS, NOW, TTL)
    assert plan_b.acquire == to_b and plan_b.wait == []


def test_a_dead_owners_shards_are_taken_only_after_its_lease_expires() -> None:
    leases = held({s: "dead" for s in SHARDS}, expires=NOW + 5)
    plan = plan_shards("a", alive("a"), leases, SHARDS, NOW, TTL)
    assert plan.wait == list(SHARDS) and plan.acquire == []
    later = plan_shards("a", alive("a"), leases, SHARDS, NOW + 5, TTL)
    assert later.acquire == list(SHARDS)


def test_my_own_expired_lease_is_reacquired_not_kept() -> None:
    leases = held({0: "a"}, expires=NOW - 1)
    plan = plan_shards("a", alive("a"), leases, [0], NOW, TTL)
    assert plan.acquire == [0] and plan.keep == []


def test_fence_deadline_precedes_any_possible_expiry() -> None:
    deadline = fence_deadline(renew_sent_at=100.0, lease_seconds=30.0, margin=5.0)
    assert deadline == pytest.approx(100.0 + 30.0 * 0.999 - 5.0)
    assert deadline < 100.0 + 30.0 - 5.0
    with pytest.raises(ValueError, match="no time"):
        fence_deadline(0.0, lease_seconds=5.0, margin=5.0)


# ---- live_others: who a one-off crawl would join ----------------------------------------
# Seen red on a scratch copy: with the lease clause of live_others removed, the
# lease-only case fails; with ``mine`` not subtracted, the own-id case does.


def test_live_others_are_fresh_heartbeats_and_unexpired_leases_not_mine() -> None:
    workers = [WorkerView("beat", 1.0, NOW - 1), WorkerView("stale", 1.0, NOW - TTL - 1),
               WorkerView("me", 1.0, NOW - 1)]
    leases = [LeaseView(1, "leasing", 2, NOW + 5), LeaseView(2, "expired", 2, NOW - 0.1),
              LeaseView(3, None, 0, 0.0), LeaseView(4, "me", 1, NOW + 5)]
    assert live_others(workers, leases, {"me"}, NOW, TTL) == ["beat", "leasing"]


def test_a_stale_worker_holding_no_live_lease_is_not_live() -> None:
    assert live_others([WorkerView("old", 1.0, NOW - TTL)], [LeaseView(1, "old", 1, NOW)],
                       (), NOW, TTL) == []


async def test_refuse_accidental_join_names_the_live_workers_of_a_store() -> None:
    from courtier.core.clock import VirtualClock
    from courtier.core.errors import ConfigError
    from courtier.crawl.app import refuse_accidental_join
    from courtier.store.memory import MemoryStore

    clock = VirtualClock()
    store = MemoryStore(clock)
    await refuse_accidental_join(store, {"me"}, TTL)  # an empty store: nothing to join
    await store.heartbeat("w7", 1.0, {"host": "box", "pid": 42}, clock.now())
    await store.heartbeat("me", 1.0, {}, clock.now())
    with pytest.raises(ConfigError, match=r"1 live worker\(s\): w7 \(host box, pid 42\);.*--join"):
        await refuse_accidental_join(store, {"me"}, TTL)
    clock.advance(TTL + 1)  # its heartbeat is now older than the TTL: dead, not joined
    await refuse_accidental_join(store, {"me"}, TTL)
