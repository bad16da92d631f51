"""Bytes a store keeps per known URL, per outbox event and per audit row, after a crawl.

``cluster_bench.py`` measures each run's store with these after its schema is made
(PostgreSQL and Citus) and again before it drops it, and prints the difference divided
by the rows the crawl added: SQLite
table by table (``dbstat``: pages in use, indexes counted with their table), plain
PostgreSQL by ``pg_total_relation_size`` of every leaf of each table's partition tree
(heap, indexes, TOAST and free-space maps: what the disk holds, dead rows included),
Citus by ``citus_total_relation_size`` of each leaf it manages, which sums every
placement on every node (each Citus shard of a distributed table, and every node's copy
of a reference table). The groups
are the plan's (``courtier plan``): the outbox (``events``), the audit log
(``fetch_log``), and everything else, which is what the known URLs cost (``urls``,
``host_queue``, ``hosts``, ``payloads``, the counters and leases).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import asyncpg

#: tables counted apart from the known URLs' (their own retention in the plan)
OUTBOX, AUDIT = "events", "fetch_log"


@dataclass(frozen=True, slots=True)
class StoreSizes:
    """Bytes of each group and the rows they are divided by."""

    url_bytes: int
    urls: int
    event_bytes: int
    events: int
    audit_bytes: int
    audit_rows: int

    def per_url(self) -> float:
        return self.url_bytes / max(1, self.urls)

    def per_event(self) -> float:
        return self.event_bytes / max(1, self.events)

    def per_audit_row(self) -> float:
        return self.audit_bytes / max(1, self.audit_rows)

    def minus(self, empty: StoreSizes) -> StoreSizes:
        """What the rows added since ``empty`` (the schema before the crawl) take: the
        fixed cost of a table's first pages (on Citus, of every Citus shard's) left out."""
        return StoreSizes(self.url_bytes - empty.url_bytes, self.urls - empty.urls,
                          self.event_bytes - empty.event_bytes, self.events - empty.events,
                          self.audit_bytes - empty.audit_bytes,
                          self.audit_rows - empty.audit_rows)

    def line(self) -> str:
        return (f"store bytes: {self.per_url():,.0f} a known URL ({self.urls:,} URLs, "
                f"{self.url_bytes / 1e6:,.1f} MB), {self.per_event():,.0f} an event "
                f"({self.events:,}), {self.per_audit_row():,.0f} an audit row "
                f"({self.audit_rows:,})")


def _grouped(sizes: dict[str, int], counts: dict[str, int]) -> StoreSizes:
    return StoreSizes(
        url_bytes=sum(v for k, v in sizes.items() if k not in (OUTBOX, AUDIT)),
        urls=counts["urls"], event_bytes=sizes.get(OUTBOX, 0), events=counts[OUTBOX],
        audit_bytes=sizes.get(AUDIT, 0), audit_rows=counts[AUDIT])


def sqlite_sizes(db: Path) -> StoreSizes:
    """A SQLite store's sizes (``dbstat``; the WAL checkpointed first)."""
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        owners = dict(conn.execute(
            "SELECT name, tbl_name FROM sqlite_schema WHERE type IN ('table', 'index')"))
        sizes: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            table = owners.get(name, name)
            sizes[table] = sizes.get(table, 0) + int(size)
        counts = {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
                  for t in ("urls", OUTBOX, AUDIT)}
    return _grouped(sizes, counts)


#: every ordinary table of the schema with the root of its partition tree, and whether
#: Citus manages it (NULL: a plain or local table; else its distribution method)
_LEAVES = """
SELECT c.oid::regclass::text AS leaf,
       coalesce((SELECT r.relname FROM pg_partition_ancestors(c.oid) a
                 JOIN pg_class r ON r.oid = a.relid
                 WHERE NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = a.relid)),
                c.relname) AS root,
       {citus_kind} AS kind
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND n.nspname = 'public'
"""


async def postgres_sizes(dsn: str) -> StoreSizes:
    """A PostgreSQL store's sizes: plain, or a Citus coordinator's whole cluster."""
    conn = await asyncpg.connect(dsn, timeout=30)
    try:
        citus = bool(await conn.fetchval(
            "SELECT count(*) FROM pg_extension WHERE extname = 'citus'"))
        kind = ("(SELECT p.partmethod::text FROM pg_dist_partition p"
                " WHERE p.logicalrelid = c.oid)" if citus else "NULL::text")
        sizes: dict[str, int] = {}
        for row in await conn.fetch(_LEAVES.format(citus_kind=kind)):
            if row["kind"] is None:  # plain, or a table Citus does not manage
                size = await conn.fetchval("SELECT pg_total_relation_size($1::regclass)",
                                           row["leaf"])
            else:
                size = await conn.fetchval("SELECT citus_total_relation_size($1::regclass)",
                                           row["leaf"])  # every node's placements
            sizes[row["root"]] = sizes.get(row["root"], 0) + int(size)
        counts = {t: int(await conn.fetchval(f"SELECT count(*) FROM {t}"))
                  for t in ("urls", OUTBOX, AUDIT)}
    finally:
        await conn.close()
    return _grouped(sizes, counts)
