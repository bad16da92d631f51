"""PostgreSQL for tests: the real server on 127.0.0.1:5432 (user root, trust auth).

:func:`temporary_database` creates a uniquely named database (connecting to the
``postgres`` database to CREATE/DROP it) and drops it afterwards. When the server
is absent the test is skipped with the reason, except under CI (tests/ci.py), where it
fails: CI must never pass without having run the PostgreSQL tests.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg

from tests.ci import required_under_ci

PG_HOST = os.environ.get("COURTIER_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("COURTIER_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("COURTIER_TEST_PG_USER", "root")
ADMIN_DSN = f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres"

#: tables emptied between tests that share one database (schema_version is kept)
DATA_TABLES = ("urls", "host_queue", "host_levels", "hosts", "shards", "events", "payloads",
               "fetch_log", "day_counts", "workers", "host_clocks", "ip_gaps", "ip_slots",
               "scope_rules", "host_tiers", "event_counts", "consumer_cursors",
               "outbox_heads", "outbox_placed", "shard_consumers")


def dsn_of(database: str) -> str:
    return f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}"


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(ADMIN_DSN, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _unavailable(exc: BaseException) -> None:
    reason = f"PostgreSQL not reachable at {PG_HOST}:{PG_PORT} ({exc})"
    required_under_ci(f"{reason} (.ci/run starts it)")


@contextmanager
def temporary_database(label: str = "test") -> Iterator[str]:
    """Create ``courtier_<label>_<random>``; yield its DSN; drop it (even on failure)."""
    name = f"courtier_{label}_{uuid.uuid4().hex[:12]}"
    try:
        asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
        _unavailable(exc)
    try:
        yield dsn_of(name)
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def truncate(dsn: str) -> None:
    """Empty a courtier database (keeping its schema) so the next test starts fresh."""
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        exists = await conn.fetchval("SELECT to_regclass('urls') IS NOT NULL")
        if exists:
            # DELETE, not TRUNCATE: for the few rows a test leaves it avoids file work
            await conn.execute(
                "".join(f"DELETE FROM {table};" for table in DATA_TABLES)
                + "UPDATE outbox_sequencer SET last_position = 0, pruned_through = 0;"
                + "UPDATE cluster_counters SET value = 0"
            )
    finally:
        await conn.close()


async def end_other_sessions(dsn: str) -> int:
    """End every other session on ``dsn``'s database (what ``DROP DATABASE … WITH (FORCE)``
    does before the drop): a database the next test shares starts without a session of
    the last one's processes. Returns how many were ended."""
    conn = await asyncpg.connect(dsn, timeout=30)
    try:
        rows = await conn.fetch(
            "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()")
    finally:
        await conn.close()
    return sum(1 for row in rows if row["ended"])


#: tables that hold rows in a new database (the migrations' own) and how they start
KEPT_TABLES = ("schema_version", "outbox_sequencer", "cluster_counters", "day_partitions")


async def reset(dsn: str) -> None:
    """Bring a courtier database that other test modules used back to what a new one
    holds once its schema is made: the day partitions the retention made dropped (as the
    store's prune drops them), every other table emptied (those :func:`truncate` leaves
    too: worker leases, trap statistics, archive segments, per-shard event counts), the
    sequencer and counters at 0. Sequences are not reset (no test reads their values)."""
    conn = await asyncpg.connect(dsn, timeout=30)
    try:
        if await conn.fetchval("SELECT to_regclass('day_partitions') IS NULL"):
            return  # no schema yet
        for row in await conn.fetch("SELECT name FROM day_partitions"):
            await conn.execute(f'DROP TABLE IF EXISTS "{row[0]}"')
        tables = await conn.fetch(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')"
            " AND NOT c.relispartition AND c.relname <> ALL($1::text[])", list(KEPT_TABLES))
        await conn.execute(
            "".join(f'DELETE FROM "{row[0]}";' for row in tables)
            + "DELETE FROM day_partitions;"
            + "UPDATE outbox_sequencer SET last_position = 0, pruned_through = 0;"
            + "UPDATE cluster_counters SET value = 0")
    finally:
        await conn.close()
