"""Connection set-up and numbered schema migrations for the SQLite store.

Migrations are the files ``migrations/NNNN_name.sql`` shipped as package
data. Each one is applied in its own ``BEGIN IMMEDIATE … COMMIT`` together
with its row in ``schema_version``, so a crash or an error mid-migration
leaves the database at the previous version, never half-migrated. Running
:func:`migrate` again on an up-to-date database changes nothing.

Everything here runs on the store's single worker thread.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from courtier.core.errors import StoreError
from courtier.core.urls import server_key_prefix, shard_of
from courtier.store.migrations import Migration
from courtier.store.migrations import load_migrations as load_shared

#: page cache per connection; a negative value is KiB (here 64 MiB)
CACHE_SIZE_KIB = 64 * 1024
BUSY_TIMEOUT_MS = 5000

#: --durability → PRAGMA synchronous (in WAL mode NORMAL survives kill -9, FULL fsyncs
#: every commit and so also survives power loss)
SYNCHRONOUS = {"normal": "NORMAL", "full": "FULL"}

#: WAL pages (4 KiB) before the committing connection checkpoints them into the file:
#: SQLite's default of 1,000 copied hot index and host pages over and over; at 10,000
#: (a WAL of up to ~40 MiB) a large-farm crawl spent 0.8 CPU-s less (1.3 %) in COMMIT.
#: Durability is the same: a commit is in the WAL either way.
WAL_AUTOCHECKPOINT_PAGES = 10_000

def server_url_key(host_key: str, url_key: bytes) -> bytes:
    """A stored ``url_key`` under the per-server layout: the host name's 4-byte prefix,
    the same 12 bytes of the URL's digest (used by the server-keys migration)."""
    return server_key_prefix(host_key) + bytes(url_key[4:])


def load_migrations() -> list[Migration]:
    """The packaged SQLite migrations in version order (a gap is a StoreError)."""
    return load_shared("courtier.store.sqlite", "SQLite")


def connect(path: str, durability: str = "normal") -> sqlite3.Connection:
    """Open ``path`` (creating it and its parent folder) and apply the PRAGMAs.

    The connection is in autocommit mode (``isolation_level=None``): every
    transaction is opened explicitly by the caller. Must be called on the
    thread that will use the connection.
    """
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if path != ":memory:" and str(mode).lower() != "wal":
            raise StoreError(f"SQLite store {path}: could not switch to WAL (mode is {mode!r})")
        conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS[durability]}")
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute(f"PRAGMA cache_size = -{CACHE_SIZE_KIB}")
        # Used by the migrations that re-derive shards and keys (0006: shards from the
        # key's leading bits; the server keys: from the host name alone).
        conn.create_function("courtier_shard_of_host", 1, shard_of, deterministic=True)
        conn.create_function("courtier_server_url_key", 2, server_url_key, deterministic=True)
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
    except BaseException:
        conn.close()
        raise
    return conn


def current_version(conn: sqlite3.Connection) -> int:
    """The highest applied migration (0 for an empty database)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


def migrate(conn: sqlite3.Connection, migrations: list[Migration] | None = None) -> int:
    """Apply every migration newer than the database; return the resulting version.

    Raises :class:`StoreError` when the database was written by a newer
    courtier (its version is above the newest migration known here).
    """
    steps = load_migrations() if migrations is None else migrations
    newest = steps[-1].version if steps else 0
    version = current_version(conn)
    if version > newest:
        raise StoreError(
            f"the database schema is version {version} but this courtier knows only up to "
            f"{newest}; upgrade courtier or point --data at another folder"
        )
    for step in steps:
        if step.version <= version:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-check under the write lock: another process may have migrated.
            if current_version(conn) >= step.version:
                conn.execute("ROLLBACK")
                continue
            for statement in _statements(step.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                (step.version, step.name, time.time()),
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        version = step.version
    return version


def _statements(script: str) -> list[str]:
    """Split a migration script into complete statements.

    ``executescript`` would commit the surrounding transaction, so each
    statement is run with ``execute``; ``sqlite3.complete_statement`` finds
    the statement boundaries (semicolons inside strings are handled).
    """
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        stripped = line.strip()
        if not buffer and (not stripped or stripped.startswith("--")):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise StoreError(f"incomplete SQL statement at the end of a migration: {buffer[:80]!r}")
    return statements
