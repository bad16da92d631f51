"""PostgreSQL commit: what a commit costs the server at each batch size, and how that
splits into a cost a commit and a cost a result (issue #29).

    python bench/commit_batch_cost.py --batch 5 --batch 30 --batch 200
    python bench/commit_batch_cost.py --batch 30 base= other=path/to/variant.sql

Each side is a database of its own on the server named by ``--admin-dsn`` (made and
dropped here), opened by the store (every migration) and then given the side's SQL
file, if any (a variant of a store function, to compare in the same run). Each holds
1,000 hosts x 20 queued URLs. A round reads one due row a host (``read_due``, as the
worker's refill) and commits them in batches with what a crawled page carries: a
~1.1 KB event, a digest, a WARC place, a title and SimHash, and one or two new URLs of
the same host. The sides take turns round by round (their order alternates), so a
drift of the machine's speed falls on all of them alike.

Measured: the CPU of the side's own server processes (``/proc``, the backends of its
database) while its commits run, per committed result. With two batch sizes or more
it also prints the least-squares fit ``cost(b) = F / b + v``: ``F`` the server's CPU a
commit whatever its size (statements, plans, partitions and indexes opened), ``v`` the
CPU a result. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
from pathlib import Path

import asyncpg

from courtier.core.outcome import Outcome
from courtier.core.records import FetchCommit, NewUrl
from courtier.core.urls import SHARD_COUNT, make_url_key, shard_of
from courtier.store.base import DueUrl
from courtier.store.postgres import PostgresStore

HOSTS = 1000
PER_HOST = 20
T0 = 1_700_000_000.0
ADMIN = "postgresql://root@127.0.0.1:5432/postgres"


def backend_cpu(database: str) -> float:
    """CPU seconds of the server processes serving ``database`` (live backends)."""
    tick = os.sysconf("SC_CLK_TCK")
    mark = f" {database}".encode()
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if not cmdline.startswith(b"postgres:") or mark not in cmdline:
                continue
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def new_url(host: str, n: int, at: float) -> NewUrl:
    url = f"http://{host}/p{n}"
    return NewUrl(make_url_key(host, url), url, host, shard_of(host), 1, 3, at, at)


class Side:
    """One database, its store and what its commits have cost so far."""

    def __init__(self, label: str, admin: str, database: str, sql: Path | None) -> None:
        self.label, self.admin, self.database, self.sql = label, admin, database, sql
        self.dsn = f"{admin.rpartition('/')[0]}/{database}"
        self.cpu: dict[int, float] = {}
        self.results: dict[int, int] = {}
        self.counter = PER_HOST
        self.rng = random.Random(1)
        self.store: PostgresStore | None = None
        self.epochs: dict[int, int] = {}

    async def open(self) -> None:
        admin = await asyncpg.connect(self.admin)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{self.database}"')
            await admin.execute(f'CREATE DATABASE "{self.database}"')
        finally:
            await admin.close()
        store = PostgresStore(self.dsn)
        await store.open()
        if self.sql is not None:  # the variant, then new sessions (no plan cached before it)
            conn = await asyncpg.connect(self.dsn)
            try:
                await conn.execute(self.sql.read_text("utf-8"))
            finally:
                await conn.close()
            await store.close()
            store = PostgresStore(self.dsn)
            await store.open()
        self.store = store
        hosts = [f"h{i:04d}.bench.test" for i in range(HOSTS)]
        seeds = [new_url(h, n, T0 - 10) for h in hosts for n in range(PER_HOST)]
        for i in range(0, len(seeds), 5000):
            await store.add_urls(seeds[i:i + 5000])
        self.epochs = await store.acquire_shards("bench", list(range(SHARD_COUNT)), T0, 10**9)

    def _commit_of(self, due: DueUrl, now: float) -> FetchCommit:
        self.counter += 1
        n, rng = self.counter, self.rng
        links = [new_url(due.host_key, n * 7 + j, now) for j in range(1 + n % 2)]
        page = {"title": "t" * 60, "description": "d" * 200, "lang": "en", "links": 40,
                "text": "y" * 700}
        return FetchCommit(
            due.url_key, due.url, due.host_key, due.shard, due.version,
            self.epochs.get(due.shard, 0), Outcome.OK, now, now + 86400, status=200,
            interval=86400, content_type="text/html",
            payload_digest=f"sha1:{rng.getrandbits(160):040x}", content_length=40000,
            warc_file="bench/CRAWL-00001.warc.gz", warc_offset=n * 1000, warc_length=9000,
            title="t" * 60, simhash=rng.getrandbits(63), delay_applied=0.0,
            robots_digest="sha1:robots", etag='"e"', change_stats='{"n":1}',
            new_urls=links, event={"kind": "fetch", **page})

    async def round(self, now: float, batch: int) -> None:
        assert self.store is not None
        due = await self.store.read_due(list(range(SHARD_COUNT)), now, 600, 1, (),
                                        self.epochs)
        for i in range(0, len(due), batch):
            commits = [self._commit_of(d, now) for d in due[i:i + batch]]
            before = backend_cpu(self.database)
            await self.store.commit(commits, [])
            self.cpu[batch] = self.cpu.get(batch, 0.0) + backend_cpu(self.database) - before
            self.results[batch] = self.results.get(batch, 0) + len(commits)

    def per_result(self, batch: int) -> float:
        return self.cpu[batch] / self.results[batch]

    async def close(self) -> None:
        if self.store is not None:
            await self.store.close()
        admin = await asyncpg.connect(self.admin)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{self.database}"')
        finally:
            await admin.close()


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares of cost = F * (1 / b) + v over (b, cost a result): (F, v)."""
    xs = [1.0 / b for b, _ in points]
    ys = [c for _, c in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
             / sum((x - mx) ** 2 for x in xs))
    return slope, my - slope * mx


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sides", nargs="*", default=["main="],
                    help="LABEL=SQLFILE (or LABEL= for the store as migrated)")
    ap.add_argument("--batch", type=int, action="append", help="results a commit (30)")
    ap.add_argument("--rounds", type=int, default=12, help="rounds a batch size and side")
    ap.add_argument("--admin-dsn", default=ADMIN)
    args = ap.parse_args()
    batches = args.batch or [30]
    sides = []
    for n, spec in enumerate(args.sides):
        label, _, sql = spec.partition("=")
        sides.append(Side(label, args.admin_dsn, f"courtier_commit_cost_{os.getpid()}_{n}",
                          Path(sql) if sql else None))
    try:
        for side in sides:
            await side.open()
        now = T0
        for batch in batches:
            for r in range(args.rounds):
                for side in sides if r % 2 == 0 else sides[::-1]:
                    await side.round(now, batch)
                now += 1
        for side in sides:
            cells = "  ".join(f"batch {b}: {side.per_result(b) * 1e6:,.0f} µs a result"
                              for b in batches)
            line = f"{side.label}: server CPU {cells}"
            if len(batches) > 1:
                fixed, each = fit([(b, side.per_result(b)) for b in batches])
                line += f"; fit: {fixed * 1e3:.2f} ms a commit + {each * 1e6:,.0f} µs a result"
            print(line)
        for side in sides[1:]:
            ratios = "  ".join(f"batch {b}: {side.per_result(b) / sides[0].per_result(b):.2f}"
                               for b in batches)
            print(f"{side.label} / {sides[0].label}: {ratios}")
    finally:
        for side in sides:
            await side.close()


if __name__ == "__main__":
    asyncio.run(main())
