"""A shard's lease is its owner's worker lease (migration 0034; in its ``workers`` row since
0039), on plain PostgreSQL.

The renewal writes one row however many shards the worker holds; and the race of an owner
whose lease expired renewing it while another worker takes its shards leaves each shard
with one holder. The two transactions are ordered by their locks (the test waits until
one call is blocked by the other's lock, or has returned), never by sleeps of a set
length. Seen red on a scratch edit of migration 0034: with the function locking every
shard row of the call FOR UPDATE as migration 0031 did, the row count test read "64 shard
rows written or locked"; with the taker's FOR SHARE SKIP LOCKED of the owner's lease row
removed, the first race test read "the owner's renewal did not wait for the taker's lock"
and the second {1: 2, 2: 2, 3: 1} (the taker took the shards being renewed)."""

from __future__ import annotations

import asyncio

import asyncpg

from courtier.store.postgres import PostgresStore
from courtier.store.postgres._cluster import RENEW_WORKER_LEASE, STILL_OWNED
from tests.integration.store.rows import T0

_ROW_STAMPS = "SELECT shard, xmin::text, xmax::text FROM shards ORDER BY shard"
_LEASE_STAMPS = "SELECT worker_id, xmin::text, xmax::text FROM workers ORDER BY worker_id"


async def _stamps(dsn: str, sql: str) -> dict[object, tuple[str, str]]:
    """Each row's (xmin, xmax): a new version or a row lock changes one of them."""
    conn = await asyncpg.connect(dsn)
    try:
        return {r[0]: (r[1], r[2]) for r in await conn.fetch(sql)}
    finally:
        await conn.close()


def _changed(before: dict[object, tuple[str, str]],
             after: dict[object, tuple[str, str]]) -> int:
    return sum(1 for k, v in after.items() if before.get(k) != v)


async def test_a_renewal_writes_one_row_however_many_shards_are_held(
        store: PostgresStore, pg_module_dsn: str) -> None:
    counts = {}
    for owner, shards in (("few", [0, 1]), ("many", list(range(100, 164)))):
        assert sorted(await store.acquire_shards(owner, shards, T0, 30)) == shards
        rows = await _stamps(pg_module_dsn, _ROW_STAMPS)
        leases = await _stamps(pg_module_dsn, _LEASE_STAMPS)
        # a coordinator round's renewal, then a single worker's
        assert sorted(await store.acquire_shards(owner, shards, T0, 30)) == shards
        assert await store.renew_shards(owner, dict.fromkeys(shards, 1), T0, 30) == set(shards)
        counts[owner] = (_changed(rows, await _stamps(pg_module_dsn, _ROW_STAMPS)),
                         _changed(leases, await _stamps(pg_module_dsn, _LEASE_STAMPS)))
    assert counts["many"][0] == 0, f"{counts['many'][0]} shard rows written or locked"
    assert counts == {"few": (0, 1), "many": (0, 1)}


async def test_a_heartbeat_that_renews_writes_its_one_row_and_nothing_else(
        store: PostgresStore, pg_module_dsn: str) -> None:
    """A coordinator round that takes nothing: its heartbeat renews the lease of every
    shard the worker owns by writing the worker's one row (migration 0039). Seen red with
    the heartbeat's renewal sent as ``renew_shards``'s statement after the heartbeat's,
    in the same transaction (two row versions: ``{'w': 2}``)."""
    shards = list(range(100, 164))
    await store.heartbeat("w", 1.0, {}, T0)
    assert sorted(await store.acquire_shards("w", shards, T0, 0)) == shards  # expired
    rows = await _stamps(pg_module_dsn, _ROW_STAMPS)
    conn = await asyncpg.connect(pg_module_dsn)
    try:
        xmin = "SELECT xmin::text FROM workers WHERE worker_id = 'w'"
        before = await conn.fetchval(xmin)
        tx_before = int(await conn.fetchval("SELECT txid_current()"))
        await store.heartbeat("w", 1.0, {"api": "x"}, T0, 30.0)
        after = await conn.fetchval(xmin)
        # one transaction wrote it, once (a second write of the row in that transaction
        # would show as a command id above 0)
        cmax = await conn.fetchval("SELECT cmin::text FROM workers WHERE worker_id = 'w'")
        assert int(after) > tx_before and after != before
        assert {"w": int(cmax) + 1} == {"w": 1}
    finally:
        await conn.close()
    assert _changed(rows, await _stamps(pg_module_dsn, _ROW_STAMPS)) == 0
    view = await store.cluster_view(shards)
    assert all(x.owner == "w" and x.epoch == 1 and x.expires_at > view.now
               for x in view.leases)
    assert await store.acquire_shards("taker", shards, T0, 30) == {}


async def _blocked_by(conn: asyncpg.Connection, blocker: int, task: asyncio.Task[object]
                      ) -> bool:
    """Wait until a backend waits for ``blocker``'s lock (True) or ``task`` is done."""
    while not task.done():
        if await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                blocker):
            return True
        await asyncio.sleep(0.01)
    return False


async def test_a_taker_first_leaves_the_renewing_owner_only_what_it_did_not_take(
        store: PostgresStore, pg_module_dsn: str) -> None:
    assert await store.acquire_shards("owner", [1, 2], T0, 0) == {1: 1, 2: 1}  # expired
    taker = await asyncpg.connect(pg_module_dsn)
    watch = await asyncpg.connect(pg_module_dsn)
    try:
        tx = taker.transaction()
        await tx.start()
        taken = await taker.fetch("SELECT * FROM courtier_acquire_shards('taker', '{1}', 30)")
        assert [(r["shard"], r["epoch"]) for r in taken] == [(1, 2)]
        renewal = asyncio.ensure_future(store.renew_shards("owner", {1: 1, 2: 1}, T0, 30))
        waited = await _blocked_by(watch, taker.get_server_pid(), renewal)
        await tx.commit()
        renewed = await renewal
        assert waited, "the owner's renewal did not wait for the taker's lock"
        assert renewed == {2}
        view = await store.cluster_view([1, 2])
        assert [(x.shard, x.owner, x.epoch) for x in view.leases] == [
            (1, "taker", 2), (2, "owner", 1)]
        assert all(x.expires_at > view.now for x in view.leases)
        assert view.handovers == {"graceful": 0, "takeover": 1}
    finally:
        await taker.close()
        await watch.close()


async def test_an_owner_renewing_first_keeps_its_shards_from_a_taker(
        store: PostgresStore, pg_module_dsn: str) -> None:
    assert await store.acquire_shards("owner", [1, 2], T0, 0) == {1: 1, 2: 1}  # expired
    owner = await asyncpg.connect(pg_module_dsn)
    try:
        tx = owner.transaction()
        await tx.start()
        await owner.execute(RENEW_WORKER_LEASE, "owner", 30.0)
        # the taker does not wait for the renewal under way: a lease being renewed is live
        assert await store.acquire_shards("taker", [1, 2, 3], T0, 30) == {3: 1}
        still = await owner.fetch(STILL_OWNED, [1, 2], [1, 1], "owner")
        await tx.commit()
        assert sorted(r["shard"] for r in still) == [1, 2]
        view = await store.cluster_view([1, 2])
        assert [(x.shard, x.owner, x.epoch) for x in view.leases] == [
            (1, "owner", 1), (2, "owner", 1)]
        assert view.handovers == {"graceful": 0, "takeover": 0}
    finally:
        await owner.close()
