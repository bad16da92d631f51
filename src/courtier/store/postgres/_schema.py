"""Numbered schema migrations of the PostgreSQL store.

Migrations are the files ``migrations/NNNN_name.sql`` shipped as package data.
Each runs in its own transaction together with its ``schema_version`` row, so a
failure leaves the database at the previous version. Concurrent processes opening
the same database serialise on a transaction-level advisory lock and re-read the
version under it, so each step is applied once. A database written by a newer
courtier (a version above the newest file here) is refused with a clear error.

A migration whose arithmetic SQL cannot do (the xxh3 of the server-keys rewrite) names a
Python step with a line ``-- courtier:python NAME``; the step (``_server_rekey.PYTHON_STEPS``)
runs in the migration's transaction just before its SQL.
"""

from __future__ import annotations

import re
import time

from courtier.core.errors import StoreError
from courtier.store.migrations import Migration
from courtier.store.migrations import load_migrations as load_shared
from courtier.store.postgres._rows import Conn
from courtier.store.postgres._server_rekey import PYTHON_STEPS

#: advisory lock key held while migrating (arbitrary, fixed: "cour")
MIGRATION_LOCK = 0x636F7572

_PYTHON_STEP = re.compile(r"^-- courtier:python ([a-z_]+)\s*$", re.MULTILINE)

def load_migrations() -> list[Migration]:
    """The packaged PostgreSQL migrations in version order (a gap is a StoreError)."""
    return load_shared("courtier.store.postgres", "PostgreSQL")


async def _ensure_version_table(conn: Conn) -> None:
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        " version integer PRIMARY KEY, name text NOT NULL,"
        " applied_at double precision NOT NULL)"
    )


async def current_version(conn: Conn) -> int:
    """The highest applied migration (0 for an empty database)."""
    if not await conn.fetchval("SELECT to_regclass('schema_version') IS NOT NULL"):
        return 0
    value = await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_version")
    return int(value or 0)


#: the migration's search path with pg_catalog searched last (for its transaction only).
#: On a Citus coordinator pg_catalog holds Citus's own relations, and one of them,
#: the view ``time_partitions``, has the name of migration 0023's table: searched first
#: (PostgreSQL's default when the path does not name pg_catalog), it took every
#: unqualified use of that name ("cannot create index on relation time_partitions").
CATALOG_LAST = ("SELECT set_config('search_path',"
                " current_setting('search_path') || ', pg_catalog', true)")


async def _has_citus(conn: Conn) -> bool:
    return bool(await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"))


async def migrate(conn: Conn, migrations: list[Migration] | None = None) -> int:
    """Apply every migration newer than the database; return the resulting version."""
    steps = load_migrations() if migrations is None else migrations
    newest = steps[-1].version if steps else 0
    version = await current_version(conn)
    if version > newest:
        raise StoreError(_too_new(version, newest))
    if version == newest:
        return version
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        await _ensure_version_table(conn)
    catalog_last = await _has_citus(conn)
    for step in steps:
        if step.version <= version:
            continue
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            now_at = await current_version(conn)
            if now_at > newest:
                raise StoreError(_too_new(now_at, newest))
            if now_at >= step.version:  # another process migrated meanwhile
                continue
            if catalog_last:
                await conn.execute(CATALOG_LAST)
            for name in _PYTHON_STEP.findall(step.sql):
                python_step = PYTHON_STEPS.get(name)
                if python_step is None:
                    raise StoreError(f"PostgreSQL migration {step.name} names an unknown "
                                     f"Python step {name!r}")
                await python_step(conn)
            await conn.execute(step.sql)
            await conn.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES ($1, $2, $3)",
                step.version,
                step.name,
                time.time(),
            )
        version = step.version
    return version


def _too_new(version: int, newest: int) -> str:
    return (
        f"the PostgreSQL schema is version {version} but this courtier knows only up to "
        f"{newest}; upgrade courtier or point --store at another database"
    )
