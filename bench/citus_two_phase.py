"""How often a commit batch needs a two-phase commit on Citus (issue 30).

    python bench/citus_two_phase.py                      # a local cluster of its own
    python bench/citus_two_phase.py --hosts 12 --pages 12
    python bench/citus_two_phase.py --dsn postgresql://root@127.0.0.1:PORT/DB  # a running one

Starts the local Citus cluster of tests/citus_cluster.py (a coordinator and two worker
nodes, throwaway servers on loopback ports) unless ``--dsn`` names a database of a
running coordinator with worker nodes, then:

1. *Probe* (a database of its own, one URL): which worker nodes Citus runs a two-phase
   commit on for one URL's intake, for ``courtier_commit`` alone (the batch's row, its
   event, its fetch_log row, its host's queue and levels: all in the URL's shard) and
   for the store's whole ``commit`` (that plus the event tallies' upsert). Read from
   Citus's own record of prepared transactions, ``pg_dist_transaction`` (one row per
   node a transaction prepared on), with its recovery, which deletes the rows, turned
   off for the run (``citus.recover_2pc_interval = -1`` on the coordinator, reset after).
2. *Batches* (the probe's database): ``--batches`` commit batches made up here, each of
   1 to 8 fetched URLs of ``--batch-hosts`` hosts and 0 to 3 new links of those hosts
   (the hosts' shards spread over both nodes; every other batch takes its URLs and
   links from the hosts of one node only), committed one at a time by the store's
   ``commit`` with their hosts' statistics; each batch classed by the worker nodes
   holding its URLs' and links' shards (one node or more), and for each the worker
   nodes its transaction prepared on (``pg_dist_transaction`` before and after): the
   share of one-node and of multi-node batches that were two-phase commits, and on how
   many nodes.
3. *Crawl*: ``courtier crawl --workers 2`` on a database of the cluster, a local test
   web (``--hosts`` × ``--pages``), to its end. Then:

   - commit batches: the fetch events grouped by the transaction that wrote them
     (``events.xid``, stamped on the coordinator, so one id per batch whatever node
     the rows sit on); for each, the worker nodes holding its URLs' shards
     (``get_shard_id_for_distribution_column`` and ``pg_dist_placement``): how many
     batches' fetched URLs sit on more than one node. The new links a batch inserts and
     its payload index rows (by digest) can add nodes, so this is a lower bound of what
     the URL rows alone would need;
   - every distributed transaction of the crawl that Citus prepared on worker nodes
     (``pg_dist_transaction``: gid ``citus_<group>_<pid>_<transaction>_<n>``), by the
     number of worker nodes: commits, refills' writes, lease rounds and heartbeats
     (reference tables: every node) together.

Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import random
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.citus_cluster import citus_cluster

from courtier.core.clock import VirtualClock
from courtier.core.outcome import Outcome
from courtier.core.records import HostStatsDelta
from courtier.core.urls import canonicalize
from courtier.store.base import FetchCommit, NewUrl
from courtier.store.postgres import PostgresStore, _rows
from courtier.testweb.server import TestWebServer
from courtier.testweb.spec import default_web

T0 = 1_700_000_000.0

#: prepared transactions per worker group, keyed by the distributed transaction
PREPARED = ("SELECT split_part(gid, '_', 3) || '_' || split_part(gid, '_', 4) AS tx,"
            " count(DISTINCT groupid) AS nodes FROM pg_dist_transaction GROUP BY 1")

#: per commit batch (the transaction that wrote its fetch events): its events and the
#: number of worker nodes holding its URLs' shards
BATCH_NODES = """
WITH batches AS (
    SELECT e.xid, count(*) AS events, array_agg(DISTINCT e.shard) AS shards
    FROM events e WHERE e.kind = 0 GROUP BY e.xid
), shard_nodes AS (
    SELECT s.shard, p.groupid FROM (SELECT DISTINCT shard FROM events) AS s
    JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('urls', s.shard)
)
SELECT b.xid::text AS xid, b.events, count(DISTINCT n.groupid) AS nodes
FROM batches b CROSS JOIN LATERAL unnest(b.shards) AS u(shard)
JOIN shard_nodes n ON n.shard = u.shard
GROUP BY b.xid, b.events
"""


async def _prepared(conn: asyncpg.Connection) -> dict[str, int]:
    return {r["tx"]: int(r["nodes"]) for r in await conn.fetch(PREPARED)}


async def _recovery(dsn: str, on: bool) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        if on:
            await conn.execute("ALTER SYSTEM RESET citus.recover_2pc_interval")
        else:
            await conn.execute("ALTER SYSTEM SET citus.recover_2pc_interval = -1")
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()


def _new(url: str) -> NewUrl:
    c = canonicalize(url)
    return NewUrl(c.url_key, c.url, c.host_key, c.shard, 0, 0, T0 - 10, T0)


def _fetched(new: NewUrl) -> FetchCommit:
    return FetchCommit(url_key=new.url_key, url=new.url, host_key=new.host_key,
                       shard=new.shard, version=0, epoch=0, outcome=Outcome.OK,
                       fetched_at=T0 + 1, next_fetch_at=T0 + 3600, status=200)


async def probe(dsn: str) -> dict[str, list[int]]:
    """Worker nodes of each two-phase commit of one URL's intake, its ``courtier_commit``
    alone and the store's whole ``commit`` (lists: nodes per prepared transaction)."""
    store = PostgresStore(dsn, clock=VirtualClock(T0))
    await store.open()
    watch = await asyncpg.connect(dsn)
    found: dict[str, list[int]] = {}
    try:
        async def step(name: str, call: object) -> None:
            before = await _prepared(watch)
            await call  # type: ignore[misc]
            after = await _prepared(watch)
            found[name] = sorted(n for tx, n in after.items() if tx not in before)

        one, two = _new("http://probe-a.example/x"), _new("http://probe-a.example/y")
        await step("intake of one URL", store.add_urls([one]))
        await store.add_urls([two])
        direct = await asyncpg.connect(dsn)
        try:
            async def commit_alone() -> None:
                async with direct.transaction():
                    await direct.fetchval(
                        "SELECT courtier_commit($1::courtier_commit[],"
                        " $2::courtier_new_url[], $3::courtier_host_delta[], $4)",
                        _rows.commit_rows([_fetched(two)]), [], [], T0 + 2)
            await step("courtier_commit alone, one URL", commit_alone())
        finally:
            await direct.close()
        await step("store.commit of one URL", store.commit([_fetched(one)]))
    finally:
        await watch.close()
        await store.close()
    return found


#: the worker group of each courtier shard (its urls rows' node)
GROUPS = ("SELECT s, p.groupid FROM unnest($1::integer[]) AS s JOIN pg_dist_placement p"
          " ON p.shardid = get_shard_id_for_distribution_column('urls', s)")


async def batches(dsn: str, count: int, n_hosts: int, seed: int = 7) -> list[tuple[int, int]]:
    """``count`` commit batches made up of the URLs and links of ``n_hosts`` hosts (see
    the module's docstring), committed one at a time: for each, (worker nodes holding
    its URLs' and links' shards, worker nodes its transaction prepared on)."""
    rng = random.Random(seed)
    store = PostgresStore(dsn, clock=VirtualClock(T0))
    await store.open()
    watch = await asyncpg.connect(dsn)
    found: list[tuple[int, int]] = []
    try:
        hosts = [f"http://batch-{i}.example" for i in range(n_hosts)]
        pages = [_new(f"{h}/p{j}") for h in hosts for j in range(64)]
        await store.add_urls(pages)
        group = {int(r[0]): int(r[1])
                 for r in await watch.fetch(GROUPS, sorted({p.shard for p in pages}))}
        epochs = await store.acquire_shards("bench", sorted(group), T0, 3600)
        left = {h: [p for p in pages if p.url.startswith(h + "/")] for h in hosts}
        host_group = {h: group[left[h][0].shard] for h in hosts}
        for n in range(count):
            # every other batch from the hosts of one node (a sample of both kinds)
            home = rng.choice(sorted(set(host_group.values()))) if n % 2 else None
            mine = [h for h in hosts if home is None or host_group[h] == home]
            chosen = [left[h].pop() for h in rng.choices(
                [h for h in mine if left[h]], k=rng.randint(1, 8))]
            links = [_new(f"{rng.choice(mine)}/link{n}-{k}") for k in range(rng.randint(0, 3))]
            links_shards = await watch.fetch(GROUPS, sorted({lk.shard for lk in links}))
            nodes = {group[p.shard] for p in chosen} | {int(r[1]) for r in links_shards}
            commits = [dataclasses.replace(_fetched(p), epoch=epochs[p.shard]) for p in chosen]
            commits[0] = dataclasses.replace(commits[0], new_urls=links)
            stats = [HostStatsDelta(p.host_key, p.shard, fetched=1) for p in chosen]
            before = await _prepared(watch)
            await store.commit(commits, stats)
            after = await _prepared(watch)
            prepared = [nodes for tx, nodes in after.items() if tx not in before]
            found.append((len(nodes), max(prepared, default=0)))
    finally:
        await watch.close()
        await store.close()
    return found


def print_batches(found: list[tuple[int, int]]) -> None:
    for label, kept in (("one-node", [f for f in found if f[0] == 1]),
                        ("multi-node", [f for f in found if f[0] > 1])):
        by_prepared: dict[int, int] = {}
        for _, prepared in kept:
            by_prepared[prepared] = by_prepared.get(prepared, 0) + 1
        two_phase = sum(n for k, n in by_prepared.items() if k > 0)
        print(f"batches, {label}: {len(kept)}, two-phase commits {two_phase}"
              f" ({100 * two_phase / max(1, len(kept)):.0f} %); prepared on "
              + ", ".join(f"{k} node(s): {n}" for k, n in sorted(by_prepared.items())))


async def crawl(dsn: str, hosts: int, pages: int, data: Path) -> tuple[int, float]:
    """``courtier crawl --workers 2`` on the local test web to its end: exit code, seconds."""
    spec = default_web(n_hosts=hosts, pages_per_host=pages, crawl_delay=0.0, latency=0.01)
    async with TestWebServer(spec) as server:
        names = data / "hosts.txt"
        names.write_text(server.web.hosts_file_text())
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "courtier", "crawl", "--workers", "2", "--store", dsn,
            "--data", str(data / "crawl"), "--resolve", str(names),
            "--allow-network", "127.0.0.0/8", "--delay", "0.05", "--lease-ttl", "10",
            "--concurrency", "16", "--linger", "0", "--progress", "none",
            *server.web.seeds(), stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True)
        try:
            _, err = await asyncio.wait_for(proc.communicate(), 1800)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        if proc.returncode:
            print(err.decode(errors="replace")[-2000:], file=sys.stderr)
        return int(proc.returncode or 0), time.monotonic() - started


async def schema(dsn: str) -> dict[str, int]:
    """Create the store's schema (its own two-phase commits: DDL on every node); the
    prepared transactions so far, left out of the crawl's figures."""
    store = PostgresStore(dsn)
    await store.open()
    await store.close()
    conn = await asyncpg.connect(dsn)
    try:
        return await _prepared(conn)
    finally:
        await conn.close()


async def figures(dsn: str, before: dict[str, int]) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        batches = await conn.fetch(BATCH_NODES)
        prepared = {tx: n for tx, n in (await _prepared(conn)).items() if tx not in before}
        workers = int(await conn.fetchval(
            "SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0"))
    finally:
        await conn.close()
    spanning = [b for b in batches if b["nodes"] > 1]
    events = sum(int(b["events"]) for b in batches)
    wide = sum(int(b["events"]) for b in spanning)
    print(f"commit batches: {len(batches)} ({events} fetch events, "
          f"{events / max(1, len(batches)):.1f} a batch)")
    print(f"batches whose fetched URLs sit on more than one of {workers} worker nodes: "
          f"{len(spanning)} ({100 * len(spanning) / max(1, len(batches)):.0f} %); mean size"
          f" {wide / max(1, len(spanning)):.1f} events against"
          f" {(events - wide) / max(1, len(batches) - len(spanning)):.1f} for the others")
    by_nodes: dict[int, int] = {}
    for n in prepared.values():
        by_nodes[n] = by_nodes.get(n, 0) + 1
    print("distributed transactions prepared on worker nodes during the crawl (any call): "
          + ", ".join(f"{n} on {k} node(s)" for k, n in sorted(by_nodes.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="a database of a running Citus coordinator")
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--batches", type=int, default=60, help="made-up commit batches")
    parser.add_argument("--batch-hosts", type=int, default=12)
    args = parser.parse_args()
    with ExitStack() as stack:
        if args.dsn:
            crawl_dsn, probe_dsn = args.dsn, None
        else:
            cluster = stack.enter_context(citus_cluster(workers=2))
            crawl_dsn = stack.enter_context(cluster.database("twophase"))
            probe_dsn = stack.enter_context(cluster.database("probe"))
        asyncio.run(_recovery(crawl_dsn, on=False))
        try:
            if probe_dsn is not None:
                for name, nodes in asyncio.run(probe(probe_dsn)).items():
                    print(f"probe, {name}: two-phase commits on worker nodes {nodes}")
                print_batches(asyncio.run(batches(probe_dsn, args.batches, args.batch_hosts)))
            before = asyncio.run(schema(crawl_dsn))
            data = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            code, seconds = asyncio.run(crawl(crawl_dsn, args.hosts, args.pages, data))
            print(f"crawl: --workers 2, {args.hosts} hosts x {args.pages} pages,"
                  f" exit {code}, {seconds:.0f} s")
            asyncio.run(figures(crawl_dsn, before))
        finally:
            asyncio.run(_recovery(crawl_dsn, on=True))


if __name__ == "__main__":
    main()
