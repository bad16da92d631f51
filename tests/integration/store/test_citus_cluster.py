"""The local Citus cluster of the tests (tests/citus_cluster.py) is a real one.

A database of the cluster has both worker nodes in Citus's node list, a table
distributed by an integer column has Citus shards on both of them, and a query naming
one value is planned as a router query onto one worker node. Seen red: with
``create_database`` adding only the first worker, the node and placement assertions
failed (``assert 1 == 2``).
"""

from __future__ import annotations

import asyncio

import asyncpg

from tests.citus_cluster import CitusCluster


async def _check(dsn: str, worker_ports: set[int]) -> None:
    conn = await asyncpg.connect(dsn, timeout=30)
    try:
        nodes = await conn.fetch(
            "SELECT nodeport FROM pg_dist_node WHERE shouldhaveshards AND isactive")
        assert {r["nodeport"] for r in nodes} == worker_ports
        await conn.execute("CREATE TABLE t (k integer PRIMARY KEY, v text)")
        await conn.execute("SELECT create_distributed_table('t', 'k')")
        await conn.execute("INSERT INTO t SELECT g, 'x' FROM generate_series(1, 100) g")
        ports = await conn.fetch("SELECT DISTINCT nodeport FROM citus_shards"
                                 " WHERE table_name = 't'::regclass")
        assert len({r["nodeport"] for r in ports}) == len(worker_ports)
        plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN SELECT v FROM t WHERE k = 7"))
        assert "Task Count: 1" in plan
        assert sum(f"port={port}" in plan for port in worker_ports) == 1, plan
        assert await conn.fetchval("SELECT count(*) FROM t") == 100
    finally:
        await conn.close()


def test_a_cluster_database_spreads_a_distributed_table_over_both_workers(
        citus: CitusCluster) -> None:
    assert len(citus.workers) == 2
    with citus.database("fixture") as dsn:
        asyncio.run(_check(dsn, {w.port for w in citus.workers}))
