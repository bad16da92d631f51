"""Many workers, one crawl: who should own each shard, and when a worker must stop.

* :mod:`courtier.cluster.rendezvous` — weighted rendezvous (highest random
  weight) hashing: each shard's *target* owner among the live workers, so that
  a join or a leave moves about 1/N of the shards and nothing else.
* :mod:`courtier.cluster.membership` — pure planning on top of it: which shards
  a worker should acquire, keep and hand over, given the live workers and the
  current leases (all times on the store's clock), and the self-fencing
  deadline after which a worker that could not renew starts no request.

Everything here is pure: no I/O, time passed in. The store holds the
``workers`` and ``shard_lease`` rows; the lease (owner, epoch, expiry) decides
who actually owns a shard, the rendezvous target only who *should*.
"""

from courtier.cluster.membership import ShardPlan, fence_deadline, plan_shards
from courtier.cluster.rendezvous import owner_of, target_owners
from courtier.core.records import LeaseView, WorkerView

__all__ = [
    "LeaseView",
    "ShardPlan",
    "WorkerView",
    "fence_deadline",
    "owner_of",
    "plan_shards",
    "target_owners",
]
