"""The Python half of the PostgreSQL server-keys migration: the new key and shard of every
stored row, which SQL cannot compute (xxh3 lives in Python).

The migration's SQL names this step with a ``-- courtier:python server_rekey`` line; the
migration runner (``_schema.py``) calls :func:`fill_server_rekey` in the migration's own
transaction before the SQL runs. It fills two temporary tables the SQL then joins on:
``server_rekey`` (old shard and key → new shard and key, one row per URL whose key
changes) and ``server_host_shards`` (host key → new shard, for every host key any table
holds). Rows are read one shard at a time (the primary key's prefix) and written with
COPY, so memory stays at one shard's rows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from courtier.core.urls import SHARD_COUNT, server_key_prefix, shard_of
from courtier.store.postgres._rows import Conn

#: the tables whose rows carry a host key and the shard derived from it
HOST_TABLES = ("hosts", "host_queue", "host_levels", "trap_stats", "host_clocks")


async def fill_server_rekey(conn: Conn) -> None:
    """Fill ``server_rekey`` and ``server_host_shards`` (temporary, dropped at commit)."""
    await conn.execute(
        "CREATE TEMP TABLE server_rekey (old_shard integer NOT NULL, old_key bytea NOT NULL,"
        " new_shard integer NOT NULL, new_key bytea NOT NULL,"
        " PRIMARY KEY (old_shard, old_key)) ON COMMIT DROP")
    await conn.execute(
        "CREATE TEMP TABLE server_host_shards (host_key text PRIMARY KEY,"
        " new_shard integer NOT NULL) ON COMMIT DROP")
    host_keys: set[str] = set()
    for shard in range(SHARD_COUNT):
        rows = await conn.fetch("SELECT url_key, host_key FROM urls WHERE shard = $1", shard)
        moved = []
        for row in rows:
            old_key, host_key = bytes(row["url_key"]), row["host_key"]
            host_keys.add(host_key)
            new_key = server_key_prefix(host_key) + old_key[4:]
            new_shard = shard_of(host_key)
            if (new_shard, new_key) != (shard, old_key):
                moved.append((shard, old_key, new_shard, new_key))
        if moved:
            await conn.copy_records_to_table("server_rekey", records=moved)
    for table in HOST_TABLES:
        host_keys.update(r["host_key"] for r in await conn.fetch(
            f"SELECT DISTINCT host_key FROM {table}"))
    await conn.copy_records_to_table(
        "server_host_shards", records=[(key, shard_of(key)) for key in sorted(host_keys)])


#: the Python steps a migration may name (``-- courtier:python NAME``)
PYTHON_STEPS: dict[str, Callable[[Conn], Awaitable[None]]] = {
    "server_rekey": fill_server_rekey,
}
