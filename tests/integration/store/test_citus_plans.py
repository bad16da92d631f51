"""How Citus runs the hot statements of the store: its own account of each plan.

On a database of the local cluster (a coordinator and two worker nodes) the store's
schema is distributed (store/postgres/_citus.py). The observer is Citus itself: with
``client_min_messages = debug1`` the coordinator says, for every statement it plans
(those inside the PL/pgSQL functions too), which subqueries or CTEs it runs apart as
"subplans" whose rows are collected on the coordinator ("generating subplan … for
subquery SELECT … FROM public.urls …"), and whether a ``LIMIT`` was pushed down to the
nodes. For single statements ``EXPLAIN`` shows the router plan (``Task Count: 1``).

What is checked here is what is already distributed-friendly:

- ``get_url`` and the lease renewal are single-task plans (a router query to the
  key's node; one task over the reference table's placements);
- the intake pulls no row of a distributed table to the coordinator (only the batch
  itself passes through it, routed to each row's node);
- the refill's host ranges push their ``LIMIT`` down to every node;
- the outbox read's final ``ORDER BY read_pos LIMIT`` is pushed down too.

What is not (docs/scale-out.md, "Citus: as built"): the refill's probe of the chosen
hosts' rows and its marking, the commit's join of the batch with ``urls``, and the
outbox sequencer's numbering of unsequenced events pull rows to the coordinator.

Seen red: a scratch copy of the Citus intake that counted the batch's known rows
(``SELECT count(*) FROM urls WHERE url_key = ANY(…)``) before inserting failed the
intake test (``{'urls'} == set()``); ``get_url``'s statement without its shard
(``WHERE url_key = $1``) failed the router test (``Task Count: 8``).
"""

from __future__ import annotations

import re

import asyncpg

from courtier.store.postgres import PostgresStore, _citus, _rows
from tests.integration.store.rows import T0, finished, url_row

#: tables distributed by shard or digest (their rows live on the worker nodes)
DISTRIBUTED = tuple(p.table for p in _citus.PLAN if p.kind == "distributed")
_SUBPLAN = re.compile(r"generating subplan \S+ for (?:subquery|CTE \w+:) (.*)", re.S)


def pulled_tables(messages: list[str]) -> set[str]:
    """Distributed tables a subplan SELECTs rows FROM (rows collected on the coordinator).

    A subplan that only inserts into or updates a table is not a read of its rows."""
    pulled: set[str] = set()
    for message in messages:
        match = _SUBPLAN.match(message)
        if match is None or not match.group(1).lstrip("( ").upper().startswith("SELECT"):
            continue
        for table in DISTRIBUTED:
            if re.search(rf"\b(?:FROM|JOIN) public\.{table}\b", match.group(1)):
                pulled.add(table)
    return pulled


async def _watching(dsn: str) -> tuple[asyncpg.Connection, list[str]]:
    """A connection whose Citus planning messages arrive in the returned list."""
    messages: list[str] = []
    conn = await asyncpg.connect(dsn)
    conn.add_log_listener(lambda _c, msg: messages.append(str(msg.message)))
    await conn.execute("SET client_min_messages = debug1")
    return conn, messages


async def _explain(dsn: str, sql: str, *args: object) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        return "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN {sql}", *args))
    finally:
        await conn.close()


async def test_get_url_and_the_lease_renewal_are_single_task_plans(
        citus_store: PostgresStore, citus_module_dsn: str) -> None:
    row = url_row("http://a.example/x")
    await citus_store.add_urls([row])
    # the statements of PostgresStore.get_url and .renew_shards (store.py), as sent
    plan = await _explain(citus_module_dsn, "SELECT * FROM urls WHERE shard = $1 AND url_key = $2",
                          row.shard, row.url_key)
    assert "Task Count: 1" in plan, plan
    assert "Distributed Subplan" not in plan, plan
    granted = await citus_store.acquire_shards("w1", [row.shard, 7], T0, 30)
    assert granted == {row.shard: 1, 7: 1}
    plan = await _explain(
        citus_module_dsn,
        "UPDATE shards s SET lease_expires_at = courtier_now() + $3"
        " FROM unnest($1::integer[], $2::bigint[]) AS t(shard, epoch)"
        " WHERE s.shard = t.shard AND s.epoch = t.epoch AND s.owner = $4 RETURNING s.shard",
        [7, row.shard], [1, 1], 30.0, "w1")
    assert "Task Count: 1" in plan, plan
    assert "Distributed Subplan" not in plan, plan
    assert await citus_store.renew_shards("w1", {7: 1, row.shard: 1}, T0, 30) == {7, row.shard}


async def test_the_intake_pulls_no_stored_row_to_the_coordinator(
        citus_store: PostgresStore, citus_module_dsn: str) -> None:
    rows = [url_row(f"http://h{i % 20}.example/p{i}") for i in range(200)]
    await citus_store.add_urls(rows[:50])  # some keys known: the conflict path runs too
    conn, messages = await _watching(citus_module_dsn)
    try:
        added = await conn.fetchval("SELECT courtier_add_urls($1::courtier_new_url[])",
                                    _rows.new_url_rows(rows))
    finally:
        await conn.close()
    assert added == 150
    assert any("subplan" in m for m in messages), "Citus said nothing about its plans"
    assert pulled_tables(messages) == set()


async def test_the_refill_host_ranges_and_the_outbox_read_push_their_limit_down(
        citus_store: PostgresStore, citus_module_dsn: str) -> None:
    rows = [url_row(f"http://h{i % 20}.example/p{i}", due=T0 - 10) for i in range(200)]
    await citus_store.add_urls(rows)
    conn, messages = await _watching(citus_module_dsn)
    try:
        due = await conn.fetch("SELECT * FROM courtier_load_due($1, $2, $3, $4, $5, $6)",
                               list(range(1024)), T0, T0 - 3600, 40, 2, [])
        refill = list(messages)
        messages.clear()
        batch = [finished(url_row(d["url"])) for d in due]
        applied = await conn.fetchval(
            "SELECT courtier_commit($1::courtier_commit[], $2::courtier_new_url[],"
            " $3::courtier_host_delta[], $4)", _rows.commit_rows(batch), [], [], T0 + 2)
        messages.clear()
        events = await conn.fetch("SELECT * FROM courtier_read_events($1, $2)", 0, 25)
        outbox = list(messages)
    finally:
        await conn.close()
    assert len(due) == 40 and len({d["host_key"] for d in due}) == 20
    assert applied[0] == 40 and len(events) == 25
    ranges = [m for m in refill if re.match(r"generating subplan \S+ for subquery SELECT shard,"
                                            r" host_key, next_due_at FROM public\.host_queue", m)]
    assert ranges, refill
    assert sum("push down of limit count" in m for m in refill) >= len(ranges)
    assert "push down of limit count: 25" in outbox
