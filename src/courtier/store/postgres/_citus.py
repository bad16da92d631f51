"""The PostgreSQL store's schema distributed over a Citus cluster.

A database is a Citus coordinator when the ``citus`` extension is created in it
(``CREATE EXTENSION citus``, the operator's step, with the worker nodes added). The
store then runs the same numbered migrations as on plain PostgreSQL, and after them
this step, :func:`distribute`, which turns every table that is still local into what
:data:`PLAN` says:

- the tables that grow with the crawl and carry the shard are distributed by
  ``shard`` in one co-location group (``urls``'s): a shard's URLs, host queue, host
  levels, hosts, events, audit rows, saved clocks, trap statistics and event tallies
  live on one node, and a statement that names one shard is a router query to it;
- ``payloads`` (keyed by digest, no shard) is distributed by ``digest`` in a group
  of its own;
- the small tables every worker reads or serialises on (leases, membership, counters,
  IP slots, scope, budgets, tiers, segments, cursors, the outbox sequencer) are
  reference tables, a copy on every node;
- ``schema_version`` stays a local table of the coordinator (only the migration reads it),
  and so does ``citus_forms``, the digest of each ``citus/*.sql`` file applied.

Citus refuses a primary key or unique index of a distributed table that does not
include its distribution column, so before distributing them the step changes three
constraints, on Citus only: ``events`` and ``fetch_log`` are keyed ``(shard, id)``
instead of ``id`` (the ids still come from one sequence, so they stay unique), and the
unique index on ``events.read_pos`` becomes a plain one (the outbox sequencer hands out
each position once under its lock: it never relied on the index to do so).

Each table is distributed in a transaction of its own under the migration lock, and
only when it is not yet in Citus's metadata, so the step is idempotent and processes
that open the store together distribute each table once. Migrations applied later
run on the distributed tables (Citus propagates their DDL to every shard); a table a
later migration adds is distributed by the next open, once :data:`PLAN` names it.

Then the Citus forms of the functions Citus cannot run as the migrations wrote them
(``citus/*.sql``: same names and signatures, ``CREATE OR REPLACE``) are applied, each
file only when its digest differs from the one ``citus_forms`` recorded, so processes
opening a running crawl's store do not replace its functions. Last, every partition of
``events`` and ``fetch_log`` gets a replica identity (``citus/replica_identity.sql``):
the rebalancer moves shards by logical replication, and a published table without one
refuses UPDATE and DELETE while its shard moves. Two statements the store
sends itself have Citus forms here too (:func:`next_due_at_sql`,
:data:`RECENT_SIMHASHES`). What each form changes and why: docs/scale-out.md, "Citus:
as built".
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from courtier.core.errors import StoreError
from courtier.store.postgres._rows import Conn

#: the distribution column of the crawl's tables and the group they share
SHARD_COLUMN = "shard"
COLOCATION_ROOT = "urls"


#: settings of every session of a store on Citus (the store's pool, after the schema step).
#: ``citus.enable_deadlock_prevention`` off: by default Citus lets one multi-shard
#: modification at a time run on a Citus shard (a ShareUpdateExclusive lock of the Citus
#: shard, held to the end of the transaction). The commit, the refill and the host-queue
#: upkeep are several multi-shard modifications each, of different tables in different
#: orders, over Citus shards that hold many courtier shards of every worker: two workers
#: with disjoint shards then deadlocked on those locks, not on a row either wrote. Off,
#: they take Citus's RowExclusive lock, and two transactions wait for each other only on
#: rows both write (which the functions lock in key order; a cross-node cycle is found
#: by Citus's distributed deadlock detection).
#:
#: ``citus.override_table_visibility`` off: Citus hides its shards from ``pg_class`` by a
#: filter it adds to every catalog query, which made asyncpg's look-up of the store's
#: composite types (once per type and session) cost 3-9 s on a loaded coordinator. The
#: store names its tables exactly (``to_regclass``, ``day_partitions``), so the shard
#: tables a node keeps (the reference tables' copies on the coordinator) never match.
SESSION_SETTINGS = {"citus.enable_deadlock_prevention": "off",
                    "citus.override_table_visibility": "off"}


@dataclass(frozen=True)
class Placement:
    """How one table is laid out on the cluster."""

    table: str
    kind: str  # "distributed", "reference" or "local"
    column: str | None = None  # distribution column (distributed tables)
    colocate_with: str | None = None  # "none" for a group of its own
    prepare: tuple[str, ...] = ()  # Citus-only DDL run first, in the same transaction


def _by_shard(table: str, *prepare: str) -> Placement:
    colocate = "none" if table == COLOCATION_ROOT else COLOCATION_ROOT
    return Placement(table, "distributed", SHARD_COLUMN, colocate, prepare)


def _reference(table: str) -> Placement:
    return Placement(table, "reference")


#: every table of the schema, in the order the step distributes them (reference tables
#: first: nothing distributed may depend on a local table; ``urls`` before its group)
PLAN: tuple[Placement, ...] = (
    *(_reference(t) for t in (
        "shards", "workers", "cluster_counters", "day_counts", "ip_gaps", "ip_slots",
        "scope_rules", "host_tiers", "archive_segments", "consumer_cursors",
        "outbox_sequencer", "shard_consumers")),
    _by_shard("urls"),
    _by_shard("host_queue"),
    _by_shard("host_levels"),
    _by_shard("hosts"),
    _by_shard("host_clocks"),
    _by_shard("trap_stats"),
    _by_shard("event_counts"),  # the outbox's tallies, per shard (migration 29)
    _by_shard("outbox_heads"),  # each shard's last event position (migration 32)
    _by_shard("outbox_placed"),  # how far the crawl-wide sequencer placed each shard (38)
    # the keys of migration 1; a schema whose events and fetch_log have no such key (time
    # partitions) needs no change
    _by_shard(
        "events",
        "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'events_pkey')"
        " THEN ALTER TABLE events DROP CONSTRAINT events_pkey, ADD PRIMARY KEY (shard, id);"
        " END IF; IF to_regclass('events_read_pos') IS NOT NULL THEN"
        " DROP INDEX events_read_pos; CREATE INDEX events_read_pos ON events (read_pos)"
        " WHERE read_pos IS NOT NULL; END IF; END $$",
    ),
    _by_shard(
        "fetch_log",
        "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'fetch_log_pkey')"
        " THEN ALTER TABLE fetch_log DROP CONSTRAINT fetch_log_pkey,"
        " ADD PRIMARY KEY (shard, id); END IF; END $$",
    ),
    Placement("payloads", "distributed", "digest", "none"),
    Placement("schema_version", "local"),
    Placement("citus_forms", "local"),  # which citus/*.sql this coordinator runs
    # the retention's list of day partitions (migration 0028): read and written only by
    # the retention through the coordinator, joined there with the coordinator's pg_class
    Placement("day_partitions", "local"),
)


def next_due_at_sql(pending: str) -> str:
    """``next_due_at`` on Citus: one aggregate over the listed shards, pushed down to the
    nodes. The plain form (a correlated ``LIMIT 1`` seek per shard of an ``unnest``) is
    refused ("correlated subqueries are not supported when the FROM clause contains a
    set returning function"); this one reads every QUEUED row of the listed shards
    (``pending``: the plain form's extra condition on ``u``)."""
    return ("SELECT min(u.next_fetch_at) FROM urls u WHERE u.shard = ANY($1::integer[])"
            f" AND u.state = 0{pending}")


#: ``load_simhashes`` on Citus: each shard's newest fingerprints by a window partitioned
#: by the shard (pushed down to the nodes). The plain form (a ``LATERAL … LIMIT`` per shard
#: of an ``unnest``, one range of migration 19's index each) is refused ("cannot push down
#: this subquery"); this one reads every fingerprinted row of the listed shards.
RECENT_SIMHASHES = (
    "SELECT r.shard, r.url_key, r.simhash FROM ("
    " SELECT u.shard, u.url_key, u.simhash, u.last_fetch_at, row_number() OVER ("
    "   PARTITION BY u.shard ORDER BY u.last_fetch_at DESC NULLS LAST, u.url_key) AS n"
    " FROM urls u WHERE u.shard = ANY($1::integer[]) AND u.simhash IS NOT NULL) AS r"
    " WHERE r.n <= $2 ORDER BY r.shard, r.last_fetch_at DESC NULLS LAST, r.url_key")


async def is_citus(conn: Conn) -> bool:
    """True when the ``citus`` extension is created in this database."""
    return bool(await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"))


async def _placed(conn: Conn, table: str) -> bool:
    """True when Citus already knows ``table`` (distributed or reference)."""
    return bool(await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = $1::regclass)",
        table))


async def _worker_nodes(conn: Conn) -> int:
    return int(await conn.fetchval(
        "SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND isactive"
        " AND shouldhaveshards") or 0)


async def distribute(conn: Conn, lock_key: int) -> list[str]:
    """Place every table of :data:`PLAN` that Citus does not know yet, then create the
    Citus forms of the functions (:func:`citus_sql`) whose file changed since the last
    open (``citus_forms`` keeps each file's digest); return the tables placed now.
    ``lock_key``: the migration's advisory lock, held by each transaction of the step."""
    if await _worker_nodes(conn) == 0:
        raise StoreError(
            "the database is a Citus coordinator without worker nodes: add them "
            "(SELECT citus_add_node(host, port)) before courtier creates its tables "
            "(docs/deployment.md, 'Citus')")
    placed = await _place_tables(conn, lock_key)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", lock_key)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS citus_forms (name text PRIMARY KEY, digest text NOT NULL)")
        applied = {r["name"]: r["digest"] for r in await conn.fetch("SELECT * FROM citus_forms")}
        for name, sql in citus_sql():
            digest = hashlib.sha256(sql.encode()).hexdigest()
            if applied.get(name) == digest:
                continue  # replacing a function in use would disturb running sessions
            await conn.execute(sql)
            await conn.execute(
                "INSERT INTO citus_forms VALUES ($1, $2)"
                " ON CONFLICT (name) DO UPDATE SET digest = EXCLUDED.digest", name, digest)
        await conn.execute(REPLICA_IDENTITIES)
    return placed


#: give every partition of ``events`` and ``fetch_log`` without one a replica identity
#: (``citus/replica_identity.sql``: the time partitions have no primary key, and a shard
#: moved by logical replication refuses their UPDATEs and DELETEs without it); run by
#: :func:`distribute` and after the retention adds a day partition on Citus
REPLICA_IDENTITIES = "SELECT courtier_replica_identities()"


def citus_sql() -> list[tuple[str, str]]:
    """The Citus forms of the schema's functions (``citus/*.sql``, in name order)."""
    folder = resources.files("courtier.store.postgres").joinpath("citus")
    return sorted((entry.name, entry.read_text("utf-8")) for entry in folder.iterdir()
                  if entry.name.endswith(".sql"))


async def _place_tables(conn: Conn, lock_key: int) -> list[str]:
    placed: list[str] = []
    for placement in PLAN:
        if placement.kind == "local":
            continue
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", lock_key)
            if await _placed(conn, placement.table):
                continue
            # DDL and the copy of existing rows one shard after another: Citus refuses a
            # transaction that reads a table in parallel and then changes its schema
            await conn.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
            for statement in placement.prepare:
                await conn.execute(statement)
            if placement.kind == "reference":
                await conn.execute("SELECT create_reference_table($1)", placement.table)
            else:
                await conn.execute(
                    "SELECT create_distributed_table($1, $2, colocate_with => $3)",
                    placement.table, placement.column, placement.colocate_with)
        placed.append(placement.table)
    return placed
