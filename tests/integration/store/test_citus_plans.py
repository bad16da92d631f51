"""How Citus runs the hot statements of the store: its own account of each plan.

On a database of the local cluster (a coordinator and two worker nodes) the store's
schema is distributed (store/postgres/_citus.py). The observer is Citus itself: with
``client_min_messages`` at ``debug1``/``debug2`` the coordinator says, for every statement
it plans (those inside the PL/pgSQL functions too), which subqueries or CTEs it runs apart
as "subplans" whose rows are collected on the coordinator, whether a ``LIMIT`` was pushed
down to the nodes, and whether a statement got a router plan. For single statements
``EXPLAIN`` shows the router plan (``Task Count: 1``). ``citus_watch.py`` collects the
messages of real store calls and finds the *pulls*: rows of a distributed table collected
on the coordinator by a subplan and sent to the nodes again.

What is checked:

- every call of a crawl's hot path (:data:`HOT_PATH`: the lease round, the intake, the
  refill, the commit with its host-queue upkeep, link intake and event counts, the
  hand-backs, the outbox read and cursors, crawl-wide and per shard, the pacer's reads)
  is planned by Citus and pulls no row, except :data:`KNOWN_PULLS`, checked as an exact
  list: a new pull fails it, and removing one fails it until the list shrinks;
- ``get_url`` and the lease renewal are single-task plans (a router query to the key's
  node; one task over the reference table's placements);
- the intake pulls no row of a distributed table to the coordinator even as a subplan
  whose rows only the coordinator reads (the batch itself passes through it, routed to
  each row's node);
- the refill's host ranges push their ``LIMIT`` down to every node, and so does the
  outbox read's final ``ORDER BY read_pos LIMIT``;
- a commit batch on one worker node is no two-phase commit at all (Citus's record of
  them, ``pg_dist_transaction``), one over both nodes is prepared on both; the payload
  index rows written after the commit are written by a retry too;
- the commit pulls no row, a batch over both nodes included: it is committed one Citus
  shard at a time, each statement a router statement (the only pull left is the
  crawl-wide outbox sequencer's, which per-shard readers never run).

The classification of every call: docs/scale-out.md, "Citus: as built" (the table of
hot-path statements).

Seen red: a scratch copy of the Citus intake that counted the batch's known rows
(``SELECT count(*) FROM urls WHERE url_key = ANY(…)``) before inserting failed the
intake test (``{'urls'} == set()``); ``get_url``'s statement without its shard
(``WHERE url_key = $1``) failed the router test (``Task Count: 8``). The seen-red checks
of the hot-path tests are in their docstrings. The per-shard consumers
(``register_shard_consumer``, ``advance_shard_consumer``): with a scratch ``_pruned``
(store/postgres/_shard_consumers.py) that took its shards from ``IN (SELECT shard FROM
outbox_heads ORDER BY last_pos LIMIT 100000)``, ``[register_shard_consumer]`` failed
(``Pull(op='register_shard_consumer', table='outbox_heads', via='subquery')``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re

import asyncpg
import pytest

from courtier.core.clock import VirtualClock
from courtier.core.records import HostStatsDelta
from courtier.core.shard_cursor import ShardCursor
from courtier.store.base import UNPLACED, NewUrl
from courtier.store.cluster import DayReservation, HostClock, TrapStats
from courtier.store.postgres import PostgresStore, _event_counts, _rows
from courtier.store.postgres._cluster import STILL_OWNED
from tests.integration.store.citus_watch import (
    DISTRIBUTED,
    Pull,
    nodes_written,
    planned,
    pulls,
    watching,
)
from tests.integration.store.rows import T0, finished, url_row
from tests.pg import truncate

#: the store calls a crawling worker makes (crawl/: the shard keeper's lease round, the
#: refiller, the committer, the releaser, the pacer, the outbox readers), in the order
#: :func:`_hot_path` makes them
HOT_PATH = (
    "acquire_shards", "heartbeat", "renew_shards", "cluster_view", "prune_workers",
    "add_urls", "read_due", "load_due", "commit", "postpone", "release", "reset_scheduled",
    "next_due_at", "pending_counts", "save_host_clocks", "save_trap_stats",
    "load_simhashes", "reserve_day_counts", "read_events_by_shard", "register_consumer",
    "read_events", "advance_consumer", "register_shard_consumer", "advance_shard_consumer",
)

#: the pulls of the hot path as built (docs/scale-out.md, "Citus: as built", says why
#: each is there and what would remove it)
KNOWN_PULLS = {
    # the outbox sequencer: the unplaced events of the shards' ranges above outbox_placed
    # (citus/sequencer.sql) numbered by one window on the coordinator, then the UPDATE of
    # events from it
    Pull("read_events", "events", "subquery"),
}


async def _hot_path(dsn: str) -> list[str]:
    """Every call of :data:`HOT_PATH` once, on a store with due rows on both worker nodes;
    Citus's planner messages of those calls (``citus_watch.watching``)."""
    await truncate(dsn)
    store = PostgresStore(dsn, clock=VirtualClock(T0))
    await store.open()
    try:
        rows = [url_row(f"http://h{i % 20}.example/p{i}", due=T0 - 10) for i in range(200)]
        await store.add_urls(rows[:100])
        shards = sorted({r.shard for r in rows})
        messages = watching(store)
        epochs = await store.acquire_shards("w1", shards, T0, 30)
        await store.heartbeat("w1", 1.0, {}, T0, 30)  # a round's: the renewal with it
        assert await store.renew_shards("w1", epochs, T0, 30) == set(shards)
        await store.cluster_view()
        await store.prune_workers(60, T0)
        assert await store.add_urls(rows[50:]) == 100  # half of them known
        due = await store.read_due(shards, T0, 40, 2, epochs=epochs)
        assert len(due) == 40
        batch = [finished(url_row(d.url), epochs[d.shard]) for d in due[:30]]
        batch[0] = dataclasses.replace(batch[0], new_urls=[
            url_row(f"http://h{i}.example/new{i}") for i in range(5)])
        stats = [HostStatsDelta(d.host_key, d.shard, fetched=1) for d in due[:30]]
        result = await store.commit(batch, stats)
        assert (result.applied, result.new_urls) == (30, 5)
        assert await store.postpone([(d.url_key, d.version, T0 + 100) for d in due[30:33]],
                                    epochs=epochs) == 3
        marked = await store.load_due(shards, T0, 10, 1, epochs=epochs)
        assert len(marked) == 10
        assert await store.release([(d.url_key, T0) for d in marked[:3]], epochs=epochs) == 3
        assert await store.reset_scheduled(shards, epochs) == 7
        assert await store.next_due_at(shards) is not None
        await store.pending_counts(shards)
        await store.save_host_clocks([HostClock(due[0].host_key, due[0].shard, T0, T0, T0)])
        await store.save_trap_stats([TrapStats(due[0].host_key, due[0].shard, b"x")])
        await store.load_simhashes(shards, 5)
        await store.reserve_day_counts([DayReservation(due[0].host_key, T0, 1, 10)])
        page = await store.read_events_by_shard(ShardCursor(), 25)
        assert len(page.events) == 25 and len(page.cursor) > 1
        await store.register_consumer("tally")
        assert len(await store.read_events(0, 25)) == 25
        await store.advance_consumer("tally", 25)
        assert await store.register_shard_consumer("by-shard") == ShardCursor()
        assert await store.advance_shard_consumer("by-shard", page.cursor) == page.cursor
        return messages
    finally:
        await store.close()


@pytest.fixture(scope="module")
def hot_path(citus_module_dsn: str) -> list[str]:
    """The planner messages of one run of :func:`_hot_path` (once per module)."""
    return asyncio.run(_hot_path(citus_module_dsn))


@pytest.mark.parametrize("op", [op for op in HOT_PATH
                                if op not in {p.op for p in KNOWN_PULLS}])
def test_the_hot_path_call_pulls_no_row_to_the_coordinator(hot_path: list[str],
                                                           op: str) -> None:
    """Seen red: a scratch copy of ``citus/refill.sql`` whose final read of
    ``courtier_read_due`` also required ``u.url_key IN (SELECT x.url_key FROM urls x
    WHERE x.shard = ANY(v_shards) ORDER BY x.next_fetch_at LIMIT 1000)`` failed
    ``[read_due]`` and ``[load_due]`` (``Pull(op='read_due', table='urls',
    via='subquery')``), every other call passing; one whose ``courtier_queue_from_levels``
    took the hosts' grouped levels from ``WITH a AS MATERIALIZED (… FROM host_levels …
    LIMIT 100000)`` (a subplan the UPDATE of host_queue reads) failed ``[add_urls]``,
    ``[load_due]``, ``[postpone]``, ``[release]`` and ``[reset_scheduled]``."""
    assert planned(hot_path, op), f"Citus planned no statement of {op}"
    assert {p for p in pulls(hot_path) if p.op == op} == set()


def test_the_hot_path_pulls_only_the_known_rows(hot_path: list[str]) -> None:
    """The exceptions, as an exact list: a call that starts pulling rows fails here
    (and in the test above), and one that stops fails here until :data:`KNOWN_PULLS`
    loses it.

    Seen red: with the scratch ``courtier_queue_from_levels`` above it failed on six
    extra pulls, ``Pull(op='commit', table='host_levels', via='a')`` among them (the
    commit's upkeep); with ``Pull("commit", "urls", "done")`` left out of
    :data:`KNOWN_PULLS` it failed naming that one (and, once ``citus/commit.sql`` stopped
    reading ``done``'s rows for its inserts, with main's form of that file it failed
    naming it again, as an extra pull)."""
    assert all(planned(hot_path, op) for op in HOT_PATH), [
        op for op in HOT_PATH if not planned(hot_path, op)]
    assert pulls(hot_path) == KNOWN_PULLS


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
            if re.search(rf"\b(?:FROM|JOIN) \(*public\.{table}\b", match.group(1)):
                pulled.add(table)
    return pulled


async def _watching(dsn: str, level: str = "debug1") -> tuple[asyncpg.Connection, list[str]]:
    """A connection whose Citus planning messages arrive in the returned list."""
    messages: list[str] = []
    conn = await asyncpg.connect(dsn)
    conn.add_log_listener(lambda _c, msg: messages.append(str(msg.message)))
    await conn.execute(f"SET client_min_messages = {level}")
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
        STILL_OWNED, [7, row.shard], [1, 1], "w1")
    assert "Task Count: 1" in plan, plan
    assert "Distributed Subplan" not in plan, plan
    assert await citus_store.renew_shards("w1", {7: 1, row.shard: 1}, T0, 30) == {7, row.shard}


async def test_the_intake_pulls_no_stored_row_to_the_coordinator(
        citus_store: PostgresStore, citus_module_dsn: str) -> None:
    rows = [url_row(f"http://h{i % 20}.example/p{i}") for i in range(200)]
    await citus_store.add_urls(rows[:50])  # some keys known: the conflict path runs too
    conn, messages = await _watching(citus_module_dsn, "debug2")
    try:
        added = await conn.fetchval("SELECT courtier_add_urls($1::courtier_new_url[])",
                                    _rows.new_url_rows(rows))
    finally:
        await conn.close()
    assert added == 150
    # one Citus shard at a time (citus/intake.sql): the inserts router VALUES lists, the
    # known keys' read a router query too (multi-shard when the batch was taken whole:
    # red with main's form), and no subplan at all
    assert "Creating router plan" in messages, "Citus said nothing about its plans"
    assert "Router planner cannot handle multi-shard select queries" not in messages
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



async def test_one_shard_calls_write_on_one_node(citus_store: PostgresStore) -> None:
    """The intake, the commit, the hand-back, the postponement and the reset of rows
    that share one shard write every distributed table on that shard's node only: the
    statements that name the rows' shards only through a join with the batch (which
    Citus cannot prune by) also name them as a constant array (citus/intake.sql,
    commit.sql, refill.sql's ``courtier_queue_from_levels``, store.py's ``release`` and
    ``postpone``). The event tallies are distributed by shard too (migration 0029) and
    written on the batch's node like the rest, and so are the outbox heads (migration 0032:
    the events' per-shard positions).

    Seen red (the intake and commit checks in this test's first form, which called
    ``courtier_add_urls`` and ``courtier_commit`` directly): with main's three Citus
    forms the intake's UPDATE of host_queue (the hosts' rows from their levels) ran on
    both worker nodes (``'host_queue': {'…:24284', '…:26933'}``); with main's
    ``citus/commit.sql`` alone, the commit's UPDATE of urls did (``'urls': {'…:22370',
    '…:25055'}``). This form: without the array in ``release``, ``('release', 'urls')``
    was written on both nodes; without it in the marking of ``courtier_load_due``,
    ``('load_due', 'urls')`` was."""
    rows = [url_row(f"http://one.example/p{i}", due=T0 - 10) for i in range(6)]
    assert len({r.shard for r in rows}) == 1
    shard = rows[0].shard
    messages = watching(citus_store, remote=True)
    assert await citus_store.add_urls(rows) == 6
    epochs = await citus_store.acquire_shards("w1", [shard], T0, 30)
    due = await citus_store.read_due([shard], T0, 6, 6, epochs=epochs)
    assert len(due) == 6
    result = await citus_store.commit([finished(url_row(d.url), epochs[shard])
                                       for d in due[:2]])
    assert result.applied == 2
    assert await citus_store.postpone([(d.url_key, d.version, T0 + 100) for d in due[2:4]],
                                      epochs=epochs) == 2
    marked = await citus_store.load_due([shard], T0, 2, 2, epochs=epochs)
    assert len(marked) == 2
    assert await citus_store.release([(marked[0].url_key, T0)], epochs=epochs) == 1
    assert await citus_store.reset_scheduled([shard], epochs) == 1
    written = {op: nodes_written(messages, op) for op in (
        "add_urls", "commit", "postpone", "load_due", "release", "reset_scheduled")}
    assert set(written["add_urls"]) >= {"urls", "host_queue", "host_levels"}, written
    assert set(written["commit"]) >= {"urls", "events", "fetch_log", "outbox_heads"}, written
    assert all("urls" in tables for tables in written.values()), written
    assert {(op, table): nodes for op, tables in written.items()
            for table, nodes in tables.items() if len(nodes) > 1} == {}
    assert len({node for tables in written.values() for nodes in tables.values()
                for node in nodes}) == 1


#: the worker group (``pg_dist_node.groupid``) holding each courtier shard's rows
_GROUP_OF_SHARD = (
    "SELECT s, p.groupid FROM unnest($1::integer[]) AS s JOIN pg_dist_placement p"
    " ON p.shardid = get_shard_id_for_distribution_column('urls', s)")


async def _prepared(conn: asyncpg.Connection) -> set[tuple[str, int]]:
    """Citus's record of its two-phase commits: (distributed transaction, worker group)
    for each node a transaction prepared on (gid ``citus_<group>_<pid>_<tx>_<n>``)."""
    return {(str(r[0]), int(r[1])) for r in await conn.fetch(
        "SELECT split_part(gid, '_', 3) || '_' || split_part(gid, '_', 4), groupid"
        " FROM pg_dist_transaction")}


async def test_a_one_node_commit_batch_is_no_two_phase_commit(
        citus_store: PostgresStore, citus_module_dsn: str) -> None:
    """A commit batch whose URLs, links and hosts sit on one worker node, over several
    Citus shards of it, commits there by a plain COMMIT: Citus prepares it on no node
    (``pg_dist_transaction``, recovery off for the test), though its payload index rows
    (``payloads``, by digest) sit on the other node; every row is written, the payloads
    indexed after the commit (first copy kept), the event tallies counted. A batch over
    both nodes is still one transaction, prepared on both.

    Seen red on a scratch copy with main's ``citus/commit.sql`` and ``store.py`` (the
    commit's inserts an INSERT … SELECT through the coordinator, by COPY; its UPDATEs
    multi-shard; the payload rows in the same transaction): the one-node batch prepared
    on both nodes, ``{1, 2}`` instead of ``set()``; with only ``citus/refill.sql``'s
    ``courtier_queue_lock`` back to its INSERT … SELECT of ``unnest``, on its node
    (``{1}``). It replaces the test that
    a one-node batch prepared on its node only (branch ``onenode``)."""
    conn = await asyncpg.connect(citus_module_dsn)
    try:
        await conn.execute("ALTER SYSTEM SET citus.recover_2pc_interval = -1")
        await conn.execute("SELECT pg_reload_conf()")
        hosts = [url_row(f"http://r{i}.example/") for i in range(64)]
        group_of = dict(await conn.fetch(_GROUP_OF_SHARD, [h.shard for h in hosts]))
        citus_shard = dict(await conn.fetch(
            "SELECT s, get_shard_id_for_distribution_column('urls', s)"
            " FROM unnest($1::integer[]) AS s", [h.shard for h in hosts]))
        home = group_of[hosts[0].shard]
        near = [h for h in hosts if group_of[h.shard] == home]
        far = [h for h in hosts if group_of[h.shard] != home]
        assert len({citus_shard[h.shard] for h in near[:4]}) > 1  # several Citus shards
        digests = [f"sha256:{i}" for i in range(40)]
        digest_group = dict(await conn.fetch(
            "SELECT d, p.groupid FROM unnest($1::text[]) AS d JOIN pg_dist_placement p"
            " ON p.shardid = get_shard_id_for_distribution_column('payloads', d)", digests))
        away = [d for d in digests if digest_group[d] != home]
        pages = [url_row(f"{h.url}p{j}", due=T0 - 10) for h in near[:5] + far[:2]
                 for j in range(2)]
        assert await citus_store.add_urls(pages) == len(pages)
        epochs = await citus_store.acquire_shards("w1", sorted({p.shard for p in pages}),
                                                  T0, 30)

        async def prepared_by_commit(batch: list[NewUrl], links: list[NewUrl],
                                     payload: list[str]) -> set[int]:
            commits = [dataclasses.replace(
                finished(p, epochs[p.shard]), payload_digest=d, warc_file="w-0.warc.gz",
                warc_offset=100 * i, warc_length=9)
                for i, (p, d) in enumerate(zip(batch, payload, strict=True))]
            commits[0] = dataclasses.replace(commits[0], new_urls=links)
            stats = [HostStatsDelta(p.host_key, p.shard, fetched=1) for p in batch]
            before = await _prepared(conn)
            result = await citus_store.commit(commits, stats)
            assert (result.applied, result.stale, result.new_urls) == (
                len(batch), 0, len(links))
            return {group for _, group in await _prepared(conn) - before}

        links = [url_row(f"{h.url}link") for h in near[5:8]]
        # 8 pages of 4 hosts on the home node; 7 digests off it, the first one twice
        assert await prepared_by_commit(pages[:8], links, [away[0], *away[:7]]) == set()
        # a host of the home node and two of the other
        assert len(await prepared_by_commit(pages[8:], [], away[7:13])) == 2
        assert await citus_store.payload_location(away[0]) == (
            "w-0.warc.gz", 0, pages[0].url, T0 + 1)  # the first copy (batch order)
        assert await citus_store.payload_location(away[6]) == (
            "w-0.warc.gz", 700, pages[7].url, T0 + 1)
        assert await citus_store.payload_location(away[12]) is not None
        counted = await citus_store.event_counts()
        assert counted.events == len(pages) and counted.outcomes == {"ok": len(pages)}
        for page in pages[:8] + links:
            assert await citus_store.get_url(page.url_key) is not None
        assert (await citus_store.counts())["events"] == len(pages)
    finally:
        await conn.execute("ALTER SYSTEM RESET citus.recover_2pc_interval")
        await conn.execute("SELECT pg_reload_conf()")
        await conn.close()


async def test_a_retried_citus_commit_indexes_the_payloads_its_first_try_applied(
        citus_store: PostgresStore, citus_module_dsn: str) -> None:
    """On Citus the payload index rows are written after the commit's transaction
    (``store/postgres/_payload_index.py``). A commit that committed but whose index rows
    were never written (the process failed in between) is retried: it is stale then
    (no second event, nothing applied twice), and its payload rows are written, because
    the URL's row is at the version the commit made and references its WARC record. A
    commit that is stale for another reason (an older version) indexes nothing.

    The first try runs in a session that prints doubles rounded (``extra_float_digits =
    0``): the audit row's time, written through a ``VALUES`` list, is still exact.

    Seen red on a scratch copy whose ``courtier_payload_ords`` returns only the rows
    applied now: the retry left ``payload_location`` empty (None); on one whose
    ``courtier_log_applied`` lacks ``SET extra_float_digits = 1``: the audit row's time
    was ``1700000000.33333`` instead of ``1700000000.3333333``."""
    rows = [url_row(f"http://retry.example/p{i}", due=T0 - 10) for i in range(2)]
    assert await citus_store.add_urls(rows) == 2
    epochs = await citus_store.acquire_shards("w1", [rows[0].shard], T0, 30)
    fetched = T0 + 1 / 3  # a double whose 15 significant digits are not exact
    commits = [dataclasses.replace(finished(r, epochs[r.shard]), payload_digest=f"sha256:r{i}",
                                   warc_file="w-1.warc.gz", warc_offset=10 * i, warc_length=9,
                                   fetched_at=fetched)
               for i, r in enumerate(rows)]
    conn = await asyncpg.connect(citus_module_dsn)
    try:
        tallies = _event_counts.written_names(commits)
        # a session that prints doubles rounded: the VALUES lists must not be
        await conn.execute("SET extra_float_digits = 0")
        async with conn.transaction():  # the commit's transaction alone: the first try
            out = await conn.fetchval(
                "SELECT courtier_commit_routed($1::courtier_commit[],"
                " $2::courtier_new_url[], $3::courtier_host_delta[], $4, $5::integer[],"
                " $6::bytea[], $7::integer[], $8::text[])", _rows.commit_rows(commits[:1]),
                [], [], T0 + 2, *_event_counts.written_names(commits[:1]))
        assert list(out) == [1, 0, 0, 0]  # applied, and its payload row still to write
        assert tallies[0]
    finally:
        await conn.close()
    assert await citus_store.payload_location("sha256:r0") is None
    older = dataclasses.replace(commits[1], version=5, payload_digest="sha256:old")
    result = await citus_store.commit([commits[0], older])  # the retry, and a stale one
    assert (result.applied, result.stale) == (0, 2)
    assert await citus_store.payload_location("sha256:r0") == (
        "w-1.warc.gz", 0, rows[0].url, fetched)
    assert await citus_store.payload_location("sha256:old") is None
    assert len(await citus_store.read_events(0, 10)) == 1
    assert [r["fetched_at"] for r in await citus_store.fetch_log()] == [fetched]


async def test_the_retention_by_shard_pulls_no_row_and_places_no_event(
        citus_store: PostgresStore) -> None:
    """With only per-shard consumers the retention (``_retention._prune_by_shard``) runs
    no sequencer and pulls no row: its row DELETE (of a day partition kept whole for a
    shard still held) and its partition drop are planned by Citus and push down. The
    events kept stay unplaced (``read_pos`` NULL: ``events_by_url`` says UNPLACED), so the
    sequencer never ran.

    Seen red: a scratch ``_MARK_BY_SHARD`` taking its rows from ``e.shard_pos IN (SELECT
    shard_pos FROM events ORDER BY shard_pos LIMIT 100000)`` failed (``Pull(op=
    'prune_events', table='events', via='subquery')``); with the crawl-wide way taken
    whatever the consumers (``prune_events`` without its test of ``consumer_cursors``) it
    failed at the first prune (``assert 0 > 0``: the day partition holding the unread
    shard stays whole, and nothing else is removed)."""
    from courtier.store.postgres._retention import DAY

    later = T0 + 30 * DAY
    assert await citus_store.prune_events(T0 - 10 * DAY, 10) == 0  # partitions ahead
    rows = [url_row(f"http://h{i % 20}.example/p{i}", due=T0 - 10) for i in range(60)]
    await citus_store.add_urls(rows)
    shards = sorted({r.shard for r in rows})
    epochs = await citus_store.acquire_shards("w1", shards, T0, 30)
    due = await citus_store.read_due(shards, T0, 60, 60, epochs=epochs)
    result = await citus_store.commit([finished(url_row(d.url), epochs[d.shard])
                                       for d in due])
    assert result.applied == 60
    everything = await citus_store.read_events_by_shard(ShardCursor(), 1000)
    held = shards[0]  # one shard unread: its day partition must stay whole
    await citus_store.register_shard_consumer("ix")
    await citus_store.advance_shard_consumer("ix", ShardCursor(
        {s: p for s, p in everything.cursor.items() if s != held}))
    messages = watching(citus_store)
    assert await citus_store.prune_events(later, 10_000) > 0
    kept = await citus_store.events_by_url(None, 1000)
    assert kept and {e.shard for e in kept} == {held}
    assert {e.id for e in kept} == {UNPLACED}  # never placed: no sequencer ran
    await citus_store.advance_shard_consumer("ix", everything.cursor)
    assert await citus_store.prune_events(later, 10_000) > 0  # the partition is dropped
    assert await citus_store.events_by_url(None, 1000) == []
    assert planned(messages, "prune_events")
    assert {p for p in pulls(messages) if p.op == "prune_events"} == set()
