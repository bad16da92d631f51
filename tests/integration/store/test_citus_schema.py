"""``--store`` on a Citus coordinator: the store distributes its own schema.

On a database of the local cluster (tests/citus_cluster.py: a coordinator and two
worker nodes, ``CREATE EXTENSION citus`` and the nodes added, nothing else) opening a
:class:`PostgresStore` runs the plain migrations and then store/postgres/_citus.py:
the crawl's tables distributed by ``shard`` in ``urls``'s co-location group,
``payloads`` by ``digest`` in a group of its own, the small tables as reference tables,
``schema_version`` local. Citus's own metadata (``pg_dist_partition``) is the observer,
and the rows of a batch of URLs land on both worker nodes.

Seen red: with ``host_queue`` placed ``colocate_with => 'none'`` the co-location
assertion failed (``host_queue`` in another group); with ``trap_stats`` left out of
``PLAN`` the coverage test failed naming it.
"""

from __future__ import annotations

import asyncpg

from courtier.core.clock import VirtualClock
from courtier.store.postgres import PostgresStore, _citus
from tests.integration.store.rows import T0, url_row


async def _placements(dsn: str) -> dict[str, tuple[str, str | None, int]]:
    """Citus's metadata: table -> (method, distribution column, co-location group)."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT logicalrelid::text AS t, partmethod::text AS m,"
            " column_to_column_name(logicalrelid, partkey) AS c, colocationid AS g"
            " FROM pg_dist_partition")
    finally:
        await conn.close()
    return {r["t"]: (r["m"], r["c"], r["g"]) for r in rows}


async def _tables(dsn: str) -> set[str]:
    """Every table of the schema, partitions left out (they follow their parent)."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
            " AND c.relname NOT IN"  # Citus's shard tables kept on the coordinator
            " (SELECT shard_name(logicalrelid, shardid)::text FROM pg_dist_shard)")
    finally:
        await conn.close()
    return {r["relname"] for r in rows}


async def test_the_store_distributes_its_schema_on_a_coordinator(citus_dsn: str) -> None:
    store = PostgresStore(citus_dsn, clock=VirtualClock(T0))
    await store.open()
    try:
        assert store.on_citus
        placed = await _placements(citus_dsn)
        group = placed["urls"][2]
        for p in _citus.PLAN:
            if p.kind == "local":
                assert p.table not in placed
            elif p.kind == "reference":
                assert placed[p.table][0] == "n", p.table
            elif p.column == "shard":
                assert placed[p.table] == ("h", "shard", group), p.table
        assert placed["payloads"][:2] == ("h", "digest")
        assert placed["payloads"][2] != group

        # a batch over many shards lands on both worker nodes
        await store.add_urls([url_row(f"http://h{i}.example/a") for i in range(64)])
        conn = await asyncpg.connect(citus_dsn)
        try:
            per_node = await conn.fetch(
                "SELECT nodeport, sum(result::bigint) AS n FROM"
                " run_command_on_placements('urls', 'SELECT count(*) FROM %s')"
                " GROUP BY nodeport")
        finally:
            await conn.close()
        assert len(per_node) == 2
        assert all(r["n"] > 0 for r in per_node), per_node
        assert sum(r["n"] for r in per_node) == 64
    finally:
        await store.close()

    again = PostgresStore(citus_dsn, clock=VirtualClock(T0))
    await again.open()  # a second open finds everything placed and changes nothing
    try:
        assert await _placements(citus_dsn) == placed
        assert (await again.counts())["urls"] == 64
    finally:
        await again.close()


async def test_the_plan_places_every_table_the_migrations_create(citus_dsn: str) -> None:
    """A migration that adds a table must say where it lives on Citus (_citus.PLAN)."""
    store = PostgresStore(citus_dsn, clock=VirtualClock(T0))
    await store.open()
    await store.close()
    named = {p.table for p in _citus.PLAN}
    assert await _tables(citus_dsn) == named


async def _without_replica_identity(dsn: str) -> list[str]:
    """Tables of Citus's metadata, and their partitions, whose UPDATEs and DELETEs a
    logical shard move would refuse: no primary key and no other replica identity."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "WITH placed AS (SELECT logicalrelid AS oid FROM pg_dist_partition),"
            " tables AS (SELECT oid FROM placed UNION"
            "  SELECT i.inhrelid FROM pg_inherits i JOIN placed p ON p.oid = i.inhparent)"
            " SELECT c.relname FROM tables t JOIN pg_class c ON c.oid = t.oid"
            " WHERE c.relkind = 'r' AND (c.relreplident = 'n' OR (c.relreplident = 'd'"
            "  AND NOT EXISTS (SELECT 1 FROM pg_index x"
            "                  WHERE x.indrelid = c.oid AND x.indisprimary)))"
            " ORDER BY 1")
    finally:
        await conn.close()
    return [r["relname"] for r in rows]


async def test_every_placed_table_can_move_by_logical_replication(citus_dsn: str) -> None:
    """The rebalancer moves shards by logical replication: every table it may move,
    the day partitions the retention adds later included, has a replica identity
    (citus/replica_identity.sql; docs/scale-out.md, "Citus: as built").

    Seen red: with ``distribute`` and ``add_partitions`` not running
    ``_citus.REPLICA_IDENTITIES``, ``events_default`` and ``fetch_log_default`` named;
    with only ``add_partitions`` not running it, or the audit retention not passing it
    the store's ``on_citus``, the 6 day partitions it made."""
    store = PostgresStore(citus_dsn, clock=VirtualClock(T0))
    await store.open()
    try:
        assert await _without_replica_identity(citus_dsn) == []
        # the retention's run adds the day partitions (``add_partitions``, told by the
        # store that it is on Citus); nothing is old enough to remove
        await store.prune_audit(T0 - 86_400, 0)
    finally:
        await store.close()
    conn = await asyncpg.connect(citus_dsn)
    try:
        made = await conn.fetchval("SELECT count(*) FROM day_partitions")
    finally:
        await conn.close()
    assert made > 0
    assert await _without_replica_identity(citus_dsn) == []


async def test_store_sessions_look_up_types_without_the_shard_filter_or_jit(
    citus_dsn: str,
) -> None:
    """asyncpg looks up each composite type the store sends (``courtier_commit[]``,
    ``courtier_new_url[]``, …) once per session, with a recursive catalog query. On a Citus
    coordinator that query got Citus's shard-hiding filter on ``pg_class`` and, from the
    filter's inflated cost, JIT compilation: 3-9 s a session before its first commit (the
    Citus contract tests paid it on every test). The store's sessions turn both off; the
    observer is PostgreSQL's own plan of a catalog query in a store session.

    Seen red: with ``citus.override_table_visibility`` left out of
    ``_citus.SESSION_SETTINGS`` the filter is in the plan; with ``jit`` left out of the
    pool's settings ``SHOW jit`` says on.
    """
    store = PostgresStore(citus_dsn, clock=VirtualClock(T0))
    await store.open()
    try:
        assert store._pool is not None
        async with store._pool.acquire() as conn:
            plan = "\n".join(r[0] for r in await conn.fetch(
                "EXPLAIN SELECT c.oid FROM pg_class c WHERE c.reltype = 1"))
            assert "relation_is_a_known_shard" not in plan
            assert await conn.fetchval("SHOW jit") == "off"
    finally:
        await store.close()
