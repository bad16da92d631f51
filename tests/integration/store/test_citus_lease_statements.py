"""A lease acquisition on Citus sends the nodes a fixed number of statements, however many
shards it takes (migration 0031); a renewal writes the worker's one row, and a coordinator
round that takes nothing writes that row once, by its heartbeat, in one two-phase commit
(migration 0039).

``shards`` and ``cluster_counters`` are reference tables: every statement that writes them
is sent to each worker node (Citus's ``citus.log_remote_commands``, read through
:func:`~tests.integration.store.citus_watch.watching`). Migration 0016's loop wrote one
row a statement, two a shard taken, so an acquisition of 368 shards took 4 s on a loaded
cluster while it held the lease changes' lock, every other worker's renewal waited, and
their 3 s leases lapsed (docs/scale-out.md, "Citus: as built").

Seen red: with migration 0016's loop left in place on a scratch copy (0031 emptied), "the
nodes got 260 shard and counter writes for 64 shards against 12 for 2"."""

from __future__ import annotations

import re

import asyncpg

from courtier.cluster.coordinator import LeaseSettings, ShardCoordinator
from courtier.core.clock import VirtualClock
from courtier.store.postgres import PostgresStore
from tests.integration.store.citus_watch import watching
from tests.integration.store.rows import T0

_LEASE_WRITE = re.compile(
    r"^\[acquire_shards\] issuing .*\b(?:UPDATE|INSERT INTO)"
    r" public\.(?:shards|cluster_counters)_\d+", re.S)


def _writes(messages: list[str]) -> int:
    return sum(1 for line in messages if _LEASE_WRITE.match(line))


async def test_taking_64_released_shards_sends_as_many_writes_as_taking_2(
        citus_store: PostgresStore) -> None:
    few, many = [0, 1], list(range(100, 164))
    held = await citus_store.acquire_shards("old", few + many, T0, 30)
    assert sorted(held) == few + many
    await citus_store.release_shards("old", few + many)

    messages = watching(citus_store, remote=True)
    assert sorted(await citus_store.acquire_shards("a", few, T0, 30)) == few
    small = _writes(messages)
    messages.clear()
    taken = await citus_store.acquire_shards("b", many, T0, 30)
    large = _writes(messages)

    assert sorted(taken) == many
    assert (await citus_store.cluster_view()).handovers == {"graceful": 66, "takeover": 0}
    assert small > 0, "no write of the acquisition seen: the watch caught nothing"
    assert large == small, (
        f"the nodes got {large} shard and counter writes for {len(many)} shards against "
        f"{small} for {len(few)}")


_RENEWAL_WRITE = re.compile(
    r"^\[(?:acquire_shards|renew_shards)\] issuing .*\b(?:UPDATE|INSERT INTO)"
    r" public\.(shards|workers)_\d+", re.S)


def _renewal_writes(messages: list[str]) -> dict[str, int]:
    """Statements sent to the nodes that write each lease table."""
    found: dict[str, int] = {"shards": 0, "workers": 0}
    for line in messages:
        match = _RENEWAL_WRITE.match(line)
        if match:
            found[match.group(1)] += 1
    return found


async def test_a_renewal_writes_the_worker_lease_row_and_no_shard_row(
        citus_store: PostgresStore) -> None:
    """A round's renewal (an acquisition of held shards) and a single worker's
    (``renew_shards``) write the owner's one lease row (migration 0034; its ``workers`` row
    since 0039), the
    same statements for 64 held shards as for 2, and nothing of ``shards``. Seen red with
    a per-shard write of the held rows put back in the function on a scratch copy (as
    migration 0031's renewal did): "renewals wrote shards: {'few': {'shards': 2, ...}"."""
    counts = {}
    for owner, shards in (("few", [0, 1]), ("many", list(range(100, 164)))):
        assert sorted(await citus_store.acquire_shards(owner, shards, T0, 30)) == shards
        messages = watching(citus_store, remote=True)
        assert sorted(await citus_store.acquire_shards(owner, shards, T0, 30)) == shards
        assert await citus_store.renew_shards(owner, dict.fromkeys(shards, 1), T0,
                                              30) == set(shards)
        counts[owner] = _renewal_writes(messages)
    assert counts["many"]["shards"] == 0, f"renewals wrote shards: {counts}"
    assert counts["few"]["workers"] > 0, "no write of the renewal seen"
    assert counts["many"] == counts["few"]


_ISSUED = re.compile(r"^\[(\w+)\] issuing (?:INSERT INTO|UPDATE|DELETE FROM)"
                     r" public\.(\w+?)_\d+\b")

#: Citus's record of its two-phase commits: (distributed transaction, worker group) for
#: each node a transaction was prepared on (gid ``citus_<group>_<pid>_<tx>_<n>``)
_PREPARED = ("SELECT split_part(gid, '_', 3) || '_' || split_part(gid, '_', 4), groupid"
             " FROM pg_dist_transaction")


async def test_a_round_that_takes_nothing_writes_one_row_in_one_two_phase_commit(
        citus_store: PostgresStore, citus_module_dsn: str) -> None:
    """A coordinator round of a worker that holds its shards and takes none: its
    heartbeat renews the lease with its membership row, one statement sent to each node,
    one distributed transaction prepared on each (``pg_dist_transaction``, recovery off
    for the test), and nothing else is written (migration 0039; before it, the
    heartbeat's write of ``workers`` and the acquisition's renewal of ``worker_leases``:
    two of each). Seen red with the coordinator naming its kept shards to
    ``acquire_shards`` every round as before: the acquisition's writes of ``workers``
    and two transactions prepared."""
    conn = await asyncpg.connect(citus_module_dsn)
    try:
        await conn.execute("ALTER SYSTEM SET citus.recover_2pc_interval = -1")
        await conn.execute("SELECT pg_reload_conf()")
        clock = VirtualClock()
        worker = ShardCoordinator(citus_store, "w1", clock, LeaseSettings(30.0),
                                  shards=range(64))
        first = await worker.round()
        assert sorted(first.gained) == list(range(64))
        messages = watching(citus_store, remote=True)
        before = set(await conn.fetch(_PREPARED))
        clock.advance(5.0)
        assert not await worker.round()
        prepared = {tuple(r) for r in await conn.fetch(_PREPARED)} - {
            tuple(r) for r in before}
    finally:
        await conn.execute("ALTER SYSTEM RESET citus.recover_2pc_interval")
        await conn.execute("SELECT pg_reload_conf()")
        await conn.close()
    writes = [m.groups() for line in messages if (m := _ISSUED.match(line))]
    nodes = len(writes)
    assert nodes >= 2, f"the watch saw {writes}"
    assert writes == [("heartbeat", "workers")] * nodes
    assert len({tx for tx, _ in prepared}) == 1 and len(prepared) == nodes, prepared
    assert worker.held == first.gained and worker.may_start()
