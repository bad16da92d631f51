"""What the server-keys migration costs: a store in the old layout (keys and shards from
scheme://authority) with N URL rows, migrated to the new one, timed.

The store is filled with SQL (not a crawl): N URL rows over N/50 host keys (http, https
and a port of N/150 host names), a third of them fetched (an event and a fetch-log row
each), a host row and a host-queue row per host key; keys and shards are written with
the old formula, as the old code stored them. Then the one step left (the server keys)
runs, as ``courtier`` runs it when it opens the store. The peer in the same run: a
rewrite of every URL row's ``shard`` column alone (what migration 6 did) on a second
copy filled the same way, so the ratio holds whatever else loads the machine. Wall time
and this process's CPU time are printed (SQLite works in this process; PostgreSQL's
work is the server's, so its CPU figure is only the Python step's).

    .venv/bin/python bench/server_keys_migration.py --rows 1000000            # SQLite
    .venv/bin/python bench/server_keys_migration.py --rows 1000000 --postgres postgresql://root@127.0.0.1/postgres
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import xxhash

from courtier.store.migrations import Migration

OLD_SHIFT = 54  # the top 10 bits: 1,024 shards


def old_key(host_key: str, url: str) -> bytes:
    return xxhash.xxh3_64_digest(host_key.encode())[:4] + xxhash.xxh3_128_digest(url.encode())[:12]


def old_shard(host_key: str) -> int:
    return xxhash.xxh3_64_intdigest(host_key.encode()) >> OLD_SHIFT


def host_keys(rows: int) -> list[str]:
    names = [f"h{i}.bench.test" for i in range(max(1, rows // 150))]
    return [f"{origin}{name}{port}" for name in names
            for origin, port in (("http://", ""), ("https://", ""), ("https://", ":8443"))]


def url_rows(rows: int) -> Iterator[tuple[bytes, str, str, int, int, float, int]]:
    """(url_key, url, host_key, shard, state, next_fetch_at, version) of every row."""
    hosts = host_keys(rows)
    for i in range(rows):
        host = hosts[i % len(hosts)]
        url = f"{host}/p/{i}.html"
        fetched = i % 3 == 0
        yield (old_key(host, url), url, host, old_shard(host), 0, 1e9 + i, 1 if fetched else 0)


def steps_before(steps: list[Migration]) -> tuple[list[Migration], list[Migration]]:
    """The steps before the server keys, and those up to and including it."""
    (last,) = [s for s in steps if s.name.endswith("_server_keys.sql")]
    return ([s for s in steps if s.version < last.version],
            [s for s in steps if s.version <= last.version])


# ---- SQLite --------------------------------------------------------------------------------


def sqlite_fill(path: Path, rows: int) -> sqlite3.Connection:
    from courtier.store.sqlite._schema import connect, load_migrations, migrate

    before, _ = steps_before(load_migrations())
    conn = connect(str(path))
    migrate(conn, before)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO urls (url_key, url, host_key, shard, state, next_fetch_at, version,"
        " discovered_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0)", url_rows(rows))
    conn.execute("INSERT INTO events (url_key, version, kind, created_at, payload)"
                 " SELECT url_key, 1, 0, 0, '{\"url_key\": \"' || lower(hex(url_key)) || '\"}'"
                 " FROM urls WHERE version = 1")
    conn.execute("INSERT INTO fetch_log (url_key, version, fetched_at, status, outcome)"
                 " SELECT url_key, 1, 0, 200, 'ok' FROM urls WHERE version = 1")
    conn.execute("INSERT INTO hosts (host_key, shard) SELECT DISTINCT host_key, shard FROM urls")
    conn.execute("INSERT INTO host_queue (shard, host_key, next_due_at, best_priority)"
                 " SELECT shard, host_key, MIN(next_fetch_at), 0 FROM urls GROUP BY 1, 2")
    conn.execute("COMMIT")
    return conn


Timing = tuple[float, float]  # (wall seconds, this process's CPU seconds)


def timed_since(wall: float, cpu: float) -> Timing:
    return time.perf_counter() - wall, time.process_time() - cpu


def sqlite_bench(rows: int, folder: Path) -> tuple[Timing, Timing]:
    from courtier.store.sqlite._schema import load_migrations, migrate

    conn = sqlite_fill(folder / "migrated.db", rows)
    _, through = steps_before(load_migrations())
    wall, cpu = time.perf_counter(), time.process_time()
    migrate(conn, through)
    migration = timed_since(wall, cpu)
    conn.close()
    peer = sqlite_fill(folder / "peer.db", rows)
    wall, cpu = time.perf_counter(), time.process_time()
    peer.execute("BEGIN IMMEDIATE")
    peer.execute("UPDATE urls SET shard = (shard + 1) % 1024")
    peer.execute("COMMIT")
    rewrite = timed_since(wall, cpu)
    peer.close()
    return migration, rewrite


# ---- PostgreSQL ----------------------------------------------------------------------------


async def pg_fill(dsn: str, rows: int) -> None:
    import asyncpg

    from courtier.store.postgres._schema import load_migrations, migrate

    before, _ = steps_before(load_migrations())
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn, before)
        records = [(shard, key, url, host, state, due, version, 0.0)
                   for key, url, host, shard, state, due, version in url_rows(rows)]
        await conn.copy_records_to_table(
            "urls", records=records,
            columns=["shard", "url_key", "url", "host_key", "state", "next_fetch_at",
                     "version", "discovered_at"])
        await conn.execute(
            "INSERT INTO events (shard, url_key, version, created_at, payload)"
            " SELECT shard, url_key, 1, 0, '{\"url_key\": \"' || encode(url_key, 'hex') || '\"}'"
            " FROM urls WHERE version = 1")
        await conn.execute(
            "INSERT INTO fetch_log (shard, url_key, version, fetched_at, status, outcome)"
            " SELECT shard, url_key, 1, 0, 200, 'ok' FROM urls WHERE version = 1")
        await conn.execute("INSERT INTO hosts (shard, host_key)"
                           " SELECT DISTINCT shard, host_key FROM urls")
        await conn.execute("INSERT INTO host_queue (shard, host_key, next_due_at, best_priority)"
                           " SELECT shard, host_key, MIN(next_fetch_at), 0 FROM urls"
                           " GROUP BY 1, 2")
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()


async def pg_database(admin: str, action: str, name: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'{action} DATABASE "{name}"'
                           + (" WITH (FORCE)" if action.startswith("DROP") else ""))
    finally:
        await conn.close()


async def pg_bench(rows: int, admin: str) -> tuple[Timing, Timing]:
    import asyncpg

    from courtier.store.postgres._schema import load_migrations, migrate

    base = admin.rsplit("/", 1)[0]
    timings = []
    for job in ("migrate", "peer"):
        name = f"courtier_rekey_bench_{uuid.uuid4().hex[:8]}"
        await pg_database(admin, "CREATE", name)
        try:
            dsn = f"{base}/{name}"
            await pg_fill(dsn, rows)
            conn = await asyncpg.connect(dsn)
            try:
                wall, cpu = time.perf_counter(), time.process_time()
                if job == "migrate":
                    await migrate(conn, steps_before(load_migrations())[1])
                else:
                    await conn.execute("UPDATE urls SET shard = (shard + 1) % 1024")
                timings.append(timed_since(wall, cpu))
            finally:
                await conn.close()
        finally:
            await pg_database(admin, "DROP", name)
    return timings[0], timings[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--postgres", metavar="ADMIN_DSN",
                        help="also (instead) time PostgreSQL; a throw-away database is made")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"rows {args.rows:,}; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
          f" on {os.cpu_count()} cores")
    if args.postgres:
        migration, rewrite = asyncio.run(pg_bench(args.rows, args.postgres))
        store = "PostgreSQL"
    else:
        with tempfile.TemporaryDirectory() as folder:
            migration, rewrite = sqlite_bench(args.rows, Path(folder))
        store = "SQLite"
    print(f"{store}: server-keys migration {migration[0]:.1f} s wall, {migration[1]:.1f} s CPU"
          f" of this process ({args.rows / migration[0]:,.0f} URL rows/s); shard-only"
          f" rewrite of every row {rewrite[0]:.1f} s wall, {rewrite[1]:.1f} s CPU; wall"
          f" ratio {migration[0] / rewrite[0]:.2f}")


if __name__ == "__main__":
    main()
