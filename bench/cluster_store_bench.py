"""Cluster store calls per second: what N workers cost the shared store.

    python bench/cluster_store_bench.py --store postgresql://root@127.0.0.1:5432/postgres
    python bench/cluster_store_bench.py --store sqlite:/tmp/csb.sqlite

Creates (PostgreSQL: a fresh database next to the one named, dropped afterwards)
and times, for ``--clients`` concurrent connections each calling in a loop for
``--seconds``: an empty read (the baseline: one read transaction returning no
row, ``scope_rules`` past the last id), a
heartbeat, ``renew_shards`` of a worker's share of 1024 shards, ``cluster_view`` of
1024 leases, ``reserve_day_counts`` of one page (global budget + one host), and
``acquire_ip_slot`` + ``release_ip_slot`` on one shared address (the worst case: every
client on the same row). Prints calls/s and each figure as a ratio of the baseline
measured in the same run. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable

from courtier.store.base import DAILY_BUDGET_KEY, Store
from courtier.store.cluster import DayReservation

SHARDS = list(range(1024))


def make(spec: str) -> Callable[[], Store]:
    if spec.startswith("sqlite:"):
        from courtier.store.sqlite import SqliteStore

        return lambda: SqliteStore(spec.removeprefix("sqlite:"))
    from courtier.store.postgres import PostgresStore

    return lambda: PostgresStore(spec, max_size=2)


async def timed(stores: list[Store], seconds: float,
                call: Callable[[Store, int], Awaitable[object]]) -> float:
    done = 0
    stop = time.perf_counter() + seconds

    async def loop(store: Store, n: int) -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await call(store, n)
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(loop(s, n) for n, s in enumerate(stores)))
    return done / (time.perf_counter() - start)


async def bench(spec: str, clients: int, seconds: float) -> None:
    factory = make(spec)
    stores = [factory() for _ in range(clients)]
    for s in stores:
        await s.open()
    try:
        share = [SHARDS[n::clients] for n in range(clients)]
        epochs = []
        for n, s in enumerate(stores):
            epochs.append(await s.acquire_shards(f"w{n}", share[n], await s.store_now(), 3600))

        async def ip(s: Store, n: int) -> None:
            grant = await s.acquire_ip_slot("192.0.2.1", f"w{n}", 1000, 0.0, 60,
                                            await s.store_now())
            if grant.granted:
                await s.release_ip_slot("192.0.2.1", grant.token)

        calls: list[tuple[str, Callable[[Store, int], Awaitable[object]]]] = [
            ("empty read (baseline)", lambda s, n: s.scope_rules(after=2**62)),
            ("heartbeat", lambda s, n: s.heartbeat(f"w{n}", 1.0, {"api": "x"}, 0.0)),
            (f"renew_shards ({len(share[0])} shards)",
             lambda s, n: s.renew_shards(f"w{n}", epochs[n], 0.0, 3600)),
            ("cluster_view (1024 leases)", lambda s, n: s.cluster_view()),
            ("reserve_day_counts (2 keys)", lambda s, n: s.reserve_day_counts([
                DayReservation(DAILY_BUDGET_KEY, 0.0, 1, 10**12),
                DayReservation(f"host{n}.test", 0.0, 1, 10**12)])),
            ("acquire+release ip slot (one IP)", ip),
        ]
        base = 0.0
        print(f"{spec.split('@')[-1]}: {clients} clients, {seconds:g} s per call")
        for name, call in calls:
            rate = await timed(stores, seconds, call)
            base = base or rate
            print(f"  {name:<36} {rate:>9.0f} calls/s   {rate / base:5.2f}x baseline")
    finally:
        for s in stores:
            await s.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    spec = args.store
    if spec.startswith(("postgresql://", "postgres://")):
        import asyncpg

        name = f"courtier_bench_{uuid.uuid4().hex[:8]}"
        admin = spec

        async def admin_sql(sql: str) -> None:
            conn = await asyncpg.connect(admin)
            try:
                await conn.execute(sql)
            finally:
                await conn.close()

        asyncio.run(admin_sql(f'CREATE DATABASE "{name}"'))
        try:
            asyncio.run(bench(spec.rsplit("/", 1)[0] + "/" + name, args.clients, args.seconds))
        finally:
            asyncio.run(admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    else:
        asyncio.run(bench(spec, args.clients, args.seconds))


if __name__ == "__main__":
    main()
