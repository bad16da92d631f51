"""Pure shard planning for one worker of a cluster.

Inputs are what a worker reads from the store in one round trip: the
``workers`` rows (id, weight, last heartbeat) and the ``shard_lease`` rows
(shard, owner, epoch, expiry), every time on the **store's** clock, plus the
store's ``now``. The output says what this worker should do next:

* ``acquire`` — shards whose target is this worker and that are free, expired,
  or already ours (the store keeps the epoch when we re-acquire our own lease
  and bumps it on a takeover);
* ``keep`` — shards we hold and should go on holding;
* ``handover`` — shards we hold whose target is now another live worker: stop
  leasing their URLs, drain, commit, save the hosts' politeness clocks, then
  release the lease so the newcomer can take it;
* ``wait`` — shards whose target is this worker but that another live owner
  still holds: it is handing them over, or it will be declared dead when its
  lease expires.

The row types (:class:`~courtier.core.records.WorkerView`,
:class:`~courtier.core.records.LeaseView`) live in the core :mod:`courtier.core.records`, so
that the store, which builds them, knows nothing of this planning. Nothing here
touches the network or a clock: the same function runs in the worker, in
``courtier cluster`` and in the tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from courtier.cluster.rendezvous import target_owners
from courtier.core.records import LeaseView, WorkerView

__all__ = ["LeaseView", "ShardPlan", "WorkerView", "fence_deadline", "live_others",
           "live_weights", "plan_shards"]


@dataclass(frozen=True, slots=True)
class ShardPlan:
    """What one worker should do with the shards (each list sorted)."""

    acquire: list[int] = field(default_factory=list)
    keep: list[int] = field(default_factory=list)
    handover: list[int] = field(default_factory=list)
    wait: list[int] = field(default_factory=list)
    targets: dict[int, str] = field(default_factory=dict)


def live_weights(workers: Iterable[WorkerView], now: float, worker_ttl: float) -> dict[str, float]:
    """Weights of the workers whose heartbeat is younger than ``worker_ttl``."""
    return {
        w.worker_id: w.weight
        for w in workers
        if w.weight > 0 and w.heartbeat_at + worker_ttl > now
    }


def live_others(workers: Iterable[WorkerView], leases: Iterable[LeaseView],
                mine: Iterable[str], now: float, worker_ttl: float) -> list[str]:
    """Ids (sorted) of the workers other than ``mine`` that look alive at ``now``: a
    heartbeat younger than ``worker_ttl``, or a shard lease not yet expired.

    A one-off crawl asks before it starts: if any, starting would join their cluster
    (and move shards) rather than run a crawl of its own."""
    skip = set(mine)
    alive = {w.worker_id for w in workers if w.heartbeat_at + worker_ttl > now}
    alive |= {lease.owner for lease in leases
              if lease.owner is not None and lease.expires_at > now}
    return sorted(alive - skip)


def plan_shards(
    me: str,
    workers: Iterable[WorkerView],
    leases: Sequence[LeaseView],
    shards: Iterable[int],
    now: float,
    worker_ttl: float,
) -> ShardPlan:
    """Plan ``me``'s next step over ``shards`` (see the module docstring).

    ``me`` counts as live whatever its stored heartbeat says (it is the one
    asking, and heartbeats before it plans). A lease whose ``expires_at`` is
    not after ``now`` is free to take, whoever held it.
    """
    weights = live_weights(workers, now, worker_ttl)
    if me not in weights:
        mine = [w.weight for w in workers if w.worker_id == me]
        weights[me] = mine[0] if mine and mine[0] > 0 else 1.0
    targets = target_owners(shards, weights)
    by_shard = {lease.shard: lease for lease in leases}
    plan = ShardPlan(targets=targets)
    for shard in sorted(targets):
        lease = by_shard.get(shard)
        held_by_me = lease is not None and lease.owner == me and lease.expires_at > now
        held_by_other = (
            lease is not None
            and lease.owner is not None
            and lease.owner != me
            and lease.expires_at > now
        )
        if targets[shard] == me:
            if held_by_me:
                plan.keep.append(shard)
            elif held_by_other:
                plan.wait.append(shard)
            else:
                plan.acquire.append(shard)
        elif held_by_me:
            plan.handover.append(shard)
    return plan


def fence_deadline(
    renew_sent_at: float, lease_seconds: float, margin: float, max_drift: float = 0.001
) -> float:
    """The local time after which a worker must start no request and cancel its fetches.

    ``renew_sent_at`` is the worker's own (monotonic) time when it *sent* the
    renewal that succeeded. The store stamped the expiry as its own now plus
    ``lease_seconds`` at some moment after that, so on the worker's clock the
    lease cannot expire before ``renew_sent_at + lease_seconds`` — less the
    clocks' relative drift over the lease (``max_drift``, a ratio). ``margin``
    leaves time to cancel in-flight fetches before another worker may take
    the shard. Raises ValueError when the margin leaves no time at all.
    """
    usable = lease_seconds * (1.0 - max_drift) - margin
    if usable <= 0:
        raise ValueError(
            f"lease of {lease_seconds} s leaves no time after a fencing margin of {margin} s"
        )
    return renew_sent_at + usable
