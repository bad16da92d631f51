"""``courtier crawl --workers 2 --store postgresql://…`` on a Citus coordinator with two
worker nodes (the local cluster of tests/citus_cluster.py, a database of its own): the
store distributes its schema when it opens, and two worker processes crawl the test web
together.

Judged by the test web's own request log (every expected page fetched, none twice, no
politeness violation, as in tests/integration/cluster), by the crawl's stderr (no
"deadlock detected": the lease and fence locks of docs/scale-out.md, "Citus: as built"),
by the outbox (one fetch event per URL and version) and by Citus's placement of the URL
rows (on both worker nodes).

Seen red, all at ``--lease-ttl 3`` (load 8-11), each time with "could not renew shard
leases in time" in the workers' log (the assertion shows those lines): the first lock
design of this branch (each round's acquisition fencing every kept shard exclusively)
fetched 3 and then 25 pages twice; with renewals unfenced but acquisitions still
fencing every kept shard, 1 page; with acquisitions fencing only the shards they may
take, 5 pages. At ``--lease-ttl 10`` it passed. On a scratch copy with the fence and
the lease changes back on row locks of ``shards`` (``_cluster`` ignoring ``on_citus``)
and ``citus.enable_deadlock_prevention`` left on, it failed on "deadlock detected"
(``acquire_shards``, ``load_due``, ``reset_scheduled``).
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
from pathlib import Path

import asyncpg
import pytest

from courtier.testweb.server import TestWebServer, politeness_violations
from courtier.testweb.spec import default_web

pytestmark = pytest.mark.timeout(900)

DELAY = 0.15
#: a lease round on Citus (reference-table writes by two-phase commit on three servers)
#: took over the 2.25 s a 3 s lease leaves on this loaded machine (docs/scale-out.md)
LEASE_TTL = 10


async def _crawl(dsn: str, data: Path, server: TestWebServer, hosts: Path) -> tuple[int, str]:
    """Run the crawl to its end; its exit code and stderr. One that does not end within
    the hang guard is stopped hard (the test then fails on what it left)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "courtier", "crawl", "--workers", "2", "--store", dsn,
        "--data", str(data), "--resolve", str(hosts), "--allow-network", "127.0.0.0/8",
        "--delay", str(DELAY), "--lease-ttl", str(LEASE_TTL), "--concurrency", "8", "--linger", "0",
        "--progress", "none", *server.web.seeds(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 600)  # a hang guard
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return int(proc.returncode or 0), err.decode(errors="replace")


async def _outbox_and_nodes(dsn: str) -> tuple[list[tuple[bytes, int]], int]:
    """(url_key, version) pairs with more than one fetch event, and how many Citus nodes
    hold URL rows."""
    conn = await asyncpg.connect(dsn)
    try:
        twice = await conn.fetch(
            "SELECT url_key, version FROM events WHERE kind = 0"
            " GROUP BY url_key, version HAVING count(*) > 1")
        nodes = await conn.fetchval(
            "SELECT count(DISTINCT n.nodeid) FROM (SELECT DISTINCT shard FROM urls) AS s"
            " JOIN pg_dist_placement p"
            "   ON p.shardid = get_shard_id_for_distribution_column('urls', s.shard)"
            " JOIN pg_dist_node n ON n.groupid = p.groupid")
    finally:
        await conn.close()
    return [(bytes(r[0]), int(r[1])) for r in twice], int(nodes)


async def test_two_workers_crawl_on_citus_every_page_once_politely(
        citus_dsn: str, tmp_path: Path) -> None:
    spec = default_web(n_hosts=8, pages_per_host=8, crawl_delay=0.3, latency=0.02)
    async with TestWebServer(spec) as server:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text(server.web.hosts_file_text())
        code, err = await _crawl(citus_dsn, tmp_path / "data", server, hosts)
        expected = server.web.expected_fetches()
        log = list(server.log)
    assert code == 0, err[-3000:]
    (tmp_path / "crawl.err").write_text(err)  # kept with the test's folder
    troubles = [line for line in err.splitlines() if " WARNING " in line or " ERROR " in line]
    assert "deadlock detected" not in err, [
        line for line in err.splitlines() if "deadlock" in line][:10]

    pages = [r for r in log if not r.path_qs.startswith("/robots")]
    counts = collections.Counter(server.url(r.host, r.path_qs) for r in pages)
    assert expected - set(counts) == set(), "expected pages not fetched"
    assert {u: n for u, n in counts.items() if n > 1} == {}, troubles[:20]
    host_delays = {h.name: max(DELAY, h.crawl_delay) for h in spec.of_kind("crawl_delay")}
    assert politeness_violations(log, delay=DELAY, max_in_flight=1,
                                 host_delays=host_delays) == []
    twice, nodes = await _outbox_and_nodes(citus_dsn)
    assert twice == [], "an outbox event twice for one (url, version)"
    assert nodes == 2, "URL rows on one worker node only"
    both = [any((tmp_path / "data" / f"worker-{i}" / "warc").glob("*.warc.gz"))
            for i in (0, 1)]
    assert all(both), "one worker process fetched nothing"
