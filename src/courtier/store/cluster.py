"""The part of the Store contract that lets many workers share one crawl.

Every store implements it (memory, SQLite, PostgreSQL) and the contract suite
(``tests/contract/test_cluster_contract.py`` and neighbours) runs it against
each. See docs/scale-out.md for how a worker uses it.

**The store clock.** Lease expiries, heartbeats, IP-slot grants and host
politeness clocks are times on the *store's* clock, :meth:`ClusterStore.store_now`:

* PostgreSQL: the server's ``clock_timestamp()`` as POSIX seconds. The ``now``
  arguments of :meth:`~ClusterStore.acquire_shards`, :meth:`~ClusterStore.renew_shards`,
  :meth:`~ClusterStore.heartbeat` and :meth:`~ClusterStore.acquire_ip_slot` are
  **ignored**: no worker's clock is trusted for who owns what.
* Memory and SQLite: the caller's ``now`` (the worker's clock, virtual in the
  simulator); ``store_now()`` is the store's own clock (the one it was built
  with, the wall clock by default). All processes sharing a SQLite file run on
  one machine, so they share its wall clock.

**Epochs.** A shard's epoch names one owner's term. It changes when the shard
changes hands and only then: on a takeover of an expired lease from another
owner (+1) and on a release (+1, so the releasing owner's late writes are
fenced even before anyone takes the shard). Acquiring a free shard takes the
stored epoch as it is (1 for a shard never held); re-acquiring or renewing a
lease you hold — even one that expired, as long as nobody took it — keeps it.
**One lease a worker.** A shard's lease is its owner's worker lease: a shard is held
while its owner's one lease (its ``expires_at``) is unexpired. :meth:`~ClusterStore.acquire_shards`,
:meth:`~ClusterStore.renew_shards` and :meth:`~ClusterStore.heartbeat` given
``lease_seconds`` renew the caller's worker lease, and so every shard it owns, named in
the call or not; a shard an owner no longer wants must be released
(the coordinator names every shard under its id each round). ``LeaseRecord.expires_at``
is the owner's lease expiry.

Every write that names an epoch (``commit`` by ``FetchCommit.epoch``;
``load_due``, ``release``, ``reset_scheduled`` and ``release_shards`` with
``epochs=``) applies only to shards whose stored epoch equals the one given.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from courtier.core.records import LeaseView, WorkerView

__all__ = [
    "SCOPE_KINDS",
    "ClusterView",
    "DayGrant",
    "DayReservation",
    "HostClock",
    "IpGrant",
    "LeaseRecord",
    "ScopeRule",
    "TrapStats",
    "WorkerRecord",
]


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """A ``workers`` row. ``info`` is what the worker published (e.g. ``{"api": "host:port",
    "pid": 123, "host": "name"}``); times are on the store clock."""

    worker_id: str
    weight: float
    heartbeat_at: float
    started_at: float
    info: dict[str, Any] = field(default_factory=dict)

    def view(self) -> WorkerView:
        return WorkerView(self.worker_id, self.weight, self.heartbeat_at)


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """A shard's lease row. ``owner`` None: free (released, or never held: epoch 0).
    ``expires_at``: the owner's worker lease expiry (0 when free or none was renewed).
    ``acquired_at``: when the current owner's term began (store clock; 0 when free)."""

    shard: int
    owner: str | None
    epoch: int
    expires_at: float
    acquired_at: float = 0.0

    def view(self) -> LeaseView:
        return LeaseView(self.shard, self.owner, self.epoch, self.expires_at)


@dataclass(frozen=True, slots=True)
class ClusterView:
    """One consistent read of membership and leases (one round trip, one snapshot).

    ``handovers`` counts shard moves since the crawl began: ``graceful`` (a shard
    released by one owner, then acquired by another) and ``takeover`` (a lease
    that expired in another owner's hands, taken over: a crash or a partition).
    """

    now: float
    workers: list[WorkerRecord]
    leases: list[LeaseRecord]
    handovers: dict[str, int]

    def worker_views(self) -> list[WorkerView]:
        return [w.view() for w in self.workers]

    def lease_views(self) -> list[LeaseView]:
        return [lease.view() for lease in self.leases]


@dataclass(frozen=True, slots=True)
class DayReservation:
    """Ask to count ``n`` fetches of ``key`` (a host_key, or ``DAILY_BUDGET_KEY``) in the
    24 h window the caller believes began at ``day_start``. ``limit`` caps the window's
    count (None: count without a cap). A negative ``n`` gives counts back (never below 0)."""

    key: str
    day_start: float
    n: int
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class DayGrant:
    """What :meth:`ClusterStore.reserve_day_counts` counted for one key: ``granted`` of the
    ``n`` asked (``min(n, limit - used)``, at least 0; all of a negative ``n``), in the
    window beginning ``day_start`` (the stored one: adopt it), whose count is now ``used``."""

    key: str
    day_start: float
    granted: int
    used: int


@dataclass(frozen=True, slots=True)
class HostClock:
    """A host's politeness clock, saved by the owner that hands its shard over (or
    periodically) and restored by the next owner. Times are on the store clock
    (convert with the offset ``store_now() - local now`` measured by the worker).

    ``next_start_at`` is the earliest time the next request may start, as the saver
    computed it: ``max(last_start_at + delay_in_force, last_end_at + delay_in_force
    when the delay counts from the end, backoff_until, retry_after_until)``; the
    restorer must not start before it even if its own arithmetic says earlier, so
    the gap the server sees across the move is never shorter than the one in force.
    ``in_flight`` > 0 means requests were still open when it was saved (a crash
    save): the restorer then treats their end as unknown and waits ``delay_in_force``
    past the save (``saved_at``) at least.
    """

    #: the server's host name (the clock is shared by every scheme and port of it;
    #: frontier/host.py ServerClock); the column keeps its historical name
    host_key: str
    shard: int
    last_start_at: float | None = None    # start of the last request sent
    last_end_at: float | None = None      # end of the last request (response or error)
    next_start_at: float | None = None    # see above
    delay_in_force: float = 0.0           # max(configured, Crawl-delay, adaptive, throttle)
    crawl_delay: float | None = None      # Crawl-delay in force (robots copy: HostRecord)
    adaptive_delay: float = 0.0           # HostTiming.adaptive_delay
    throttle_delay: float = 0.0           # HostTiming.throttle_delay (AIMD: 0 = none)
    throttle_events: int = 0
    failures: int = 0                     # consecutive failures (the back-off step)
    backoff_until: float | None = None
    retry_after_until: float | None = None
    in_flight: int = 0
    saved_at: float = 0.0                 # store clock, stamped by the store on save


@dataclass(frozen=True, slots=True)
class IpGrant:
    """An answer of :meth:`ClusterStore.acquire_ip_slot`. ``granted``: a slot is yours
    until ``expires_at`` (store clock) or until released by ``token``. Otherwise
    ``retry_at`` is the earliest store time a new ask could succeed."""

    granted: bool
    now: float
    token: int = 0
    expires_at: float = 0.0
    retry_at: float = 0.0


@dataclass(frozen=True, slots=True)
class TrapStats:
    """A host's trap template statistics (``frontier/trap_state.py`` encodes ``data``;
    to the store it is opaque), saved by the host's owner on handover and periodically,
    restored by the next owner. ``saved_at`` is stamped by the store (store clock)."""

    host_key: str
    shard: int
    data: bytes
    saved_at: float = 0.0


#: kinds of :class:`ScopeRule`
SCOPE_KINDS = ("host", "domain", "include", "exclude")


@dataclass(frozen=True, slots=True)
class ScopeRule:
    """A rule every worker's scope applies: ``host``/``domain`` admit a seed's host or
    registrable domain (per ``--scope``); ``include``/``exclude`` are regexes. ``id``
    increases in insertion order (poll with ``after=``)."""

    kind: str
    value: str
    id: int = 0


class ClusterStore(Protocol):
    """Membership, leases, and the state that crosses shards."""

    async def store_now(self) -> float:
        """The store clock (see the module docstring), POSIX seconds."""

    # ---- membership ----------------------------------------------------------------------

    async def heartbeat(self, worker_id: str, weight: float, info: Mapping[str, Any],
                        now: float, lease_seconds: float | None = None) -> float:
        """Register or refresh a worker: upsert its row with ``heartbeat_at`` = store now
        (``now`` in memory/SQLite), ``weight`` and ``info`` (JSON-able, replaces the old);
        ``started_at`` is kept from the first heartbeat. With ``lease_seconds``, also renew
        the worker's lease (every shard it owns, as :meth:`renew_shards` does) until the
        same store now + ``lease_seconds``, in the same write: a coordinator round that
        takes no shard writes nothing else (PostgreSQL: one row, one statement). Returns
        the stamped time."""

    async def leave(self, worker_id: str) -> None:
        """Remove the worker from the membership (a graceful exit, after releasing its
        shards). Its leases are untouched: release them first. Unknown ids are ignored."""

    async def prune_workers(self, max_age: float, now: float) -> list[str]:
        """Forget workers long dead: those silent for more than ``max_age`` seconds (store
        clock; ``now`` in memory/SQLite) whose worker lease has ended, their membership
        and their lease with it (an owner that renewed without heartbeats, e.g. a single
        process, is forgotten once its lease ended more than ``max_age`` ago; a worker
        lease that ended is no different from none). Returns the ids of the workers
        forgotten (members only), sorted."""

    async def cluster_view(self, shards: Collection[int] | None = None) -> ClusterView:
        """Store now, every worker row (live or not: compare ``heartbeat_at`` with a TTL),
        the lease rows of ``shards`` (every shard ever leased when None; a shard never
        leased has no row: it is free with epoch 0) in shard order, and the handover
        counters — all from one snapshot, in one round trip."""

    # ---- leases --------------------------------------------------------------------------

    async def acquire_shards(
        self, owner: str, shards: Sequence[int], now: float, lease_seconds: float
    ) -> dict[int, int]:
        """Take the shards that are free, expired, or already ours, and renew ``owner``'s
        worker lease (every shard it owns) until store now + ``lease_seconds``. Returns
        ``{shard: epoch}`` for the shards of ``shards`` now held (none and no renewal
        when ``shards`` is empty).

        Epochs (module docstring): ours (live or expired) → kept; free → the stored one
        (1 if never held; a release already bumped it); expired in another owner's hands
        → +1 and counted as a ``takeover``; free after another owner released it →
        counted as ``graceful``. A shard another owner holds unexpired (its owner's
        worker lease) is refused."""

    async def renew_shards(
        self, owner: str, epochs: dict[int, int], now: float, lease_seconds: float
    ) -> set[int]:
        """Extend ``owner``'s worker lease (every shard it owns) to store now +
        ``lease_seconds`` and return the shards of ``epochs`` it still owns with the same
        epoch, expired or not (nobody took them). Empty ``epochs``: nothing renewed."""

    async def release_shards(self, owner: str, shards: Sequence[int],
                             epochs: Mapping[int, int] | None = None) -> None:
        """Give up the shards ``owner`` holds (with the epoch in ``epochs`` when given):
        the lease becomes free, the epoch is bumped (late writes of the old term are
        rejected), and SCHEDULED rows of them go back to QUEUED. Others are untouched."""

    # ---- shared daily budget -------------------------------------------------------------

    async def reserve_day_counts(self, reservations: Sequence[DayReservation]
                                 ) -> dict[str, DayGrant]:
        """Count fetches against per-window caps, atomically per key, all in one
        transaction, valid with any number of concurrent callers (their grants never sum
        past a limit, and no count is lost).

        Window rule per key: no stored row → the caller's ``day_start`` with 0 used; a
        caller's ``day_start`` at least 24 h after the stored one → a new window (its
        ``day_start``, 0 used); otherwise the stored window (older or newer than the
        caller's) is the one counted in, and returned. Then ``granted = min(n, limit -
        used)`` (≥ 0; ``n`` when no limit) and ``used += granted``. Several reservations of
        one key in a call apply in order. Durable when the call returns: callers count a
        fetch *before* it starts, so a crash never spends a budget twice."""

    # ---- host politeness clocks ----------------------------------------------------------

    async def save_host_clocks(self, clocks: Sequence[HostClock]) -> None:
        """Upsert each server's clock (keyed by ``HostClock.host_key``, the host name;
        replacing the stored one), stamping ``saved_at`` with the store clock; one
        transaction."""

    async def load_host_clocks(self, host_keys: Collection[str]) -> dict[str, HostClock]:
        """The stored clocks of these servers (host names); those never saved are absent."""

    # ---- trap statistics and near-duplicate fingerprints of a shard -----------------------

    async def save_trap_stats(self, stats: Sequence[TrapStats]) -> None:
        """Upsert each host's trap statistics (replacing the stored row; the last of one
        host in the call wins), stamping ``saved_at``; one transaction."""

    async def load_trap_stats(self, host_keys: Collection[str]) -> dict[str, TrapStats]:
        """The stored trap statistics of these hosts; hosts never saved are absent."""

    async def load_simhashes(self, shards: Collection[int], limit_per_shard: int
                             ) -> dict[int, list[tuple[bytes, int]]]:
        """``(url_key, simhash)`` of fetched rows of each shard that have a SimHash
        (unsigned 64-bit), most recently fetched first (ties by url_key), at most
        ``limit_per_shard`` per shard: what a new owner rebuilds its near-duplicate index
        from. Shards without such rows are absent. A read; one round trip."""

    async def url_keys(self, shards: Sequence[int], after: bytes, limit: int) -> bytes:
        """The ``url_key`` of every row of ``shards`` above ``after`` (``b""``: from the
        first), in key order, at most ``limit`` of them, joined into one ``bytes`` (16
        bytes a key). A key's leading bits are its shard, so key order is shard order
        first: a shard is read completely once a key of a later shard comes back, or
        fewer than ``limit`` do. What a new owner streams its known-URL set from
        (crawl/known_loader.py). A read; one round trip."""

    # ---- per-IP slots --------------------------------------------------------------------

    async def acquire_ip_slot(self, ip: str, owner: str, max_concurrent: int,
                              min_gap: float, ttl: float, now: float) -> IpGrant:
        """Ask to start one request to ``ip`` now. Atomic per IP (row lock / one
        transaction): slots past their expiry are dropped; a slot is granted only if
        fewer than ``max_concurrent`` are held and store now ≥ the IP's
        ``next_allowed_at``; then ``next_allowed_at = now + min_gap`` and the slot lasts
        until ``now + ttl``. Otherwise ``retry_at`` = max(next_allowed_at, the earliest
        slot expiry when full)."""

    async def release_ip_slot(self, ip: str, token: int) -> None:
        """Free a slot before its expiry (the request ended). Unknown tokens are ignored."""

    async def release_ip_slots_of(self, owner: str) -> int:
        """Free every slot ``owner`` holds, of any address; return how many. A worker
        calls it as it starts: slots under its id are its earlier process's, whose
        requests ended with it (one live process per id: the data-dir lock)."""

    # ---- scope shared by every worker ----------------------------------------------------

    async def add_scope_rules(self, rules: Sequence[ScopeRule]) -> int:
        """Store rules (``id`` ignored) not stored yet (by kind and value); return how
        many were new. An unknown kind, or an include/exclude value that is not a regular
        expression, raises StoreError (and nothing of the call is stored)."""

    async def scope_rules(self, after: int = 0) -> list[ScopeRule]:
        """Rules with ``id > after`` in id order (poll to apply rules added elsewhere)."""
