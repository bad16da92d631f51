"""A one-off ``courtier crawl`` on the store of a live cluster refuses to join it unless
asked (``--join``); real processes: a ``courtier worker`` crawling, then the crawl.

Seen red on a scratch copy: with the check in ``courtier.crawl.app.crawl`` removed, the crawl
without ``--join`` exited 0 and had joined (the first test failed on its exit status).
"""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from courtier.core.urls import SHARD_COUNT
from tests.integration.cluster.harness import Cluster, agent_of, wait_for

pytestmark = pytest.mark.timeout(300)


async def one_off_crawl(cluster: Cluster, *extra: str) -> tuple[int, str]:
    """``courtier crawl --store <the cluster's database> --max-pages 1``; exit code, stderr."""
    args = [
        "crawl", "--store", cluster.dsn, "--data", str(cluster.root / "oneoff"),
        "--worker-id", "oneoff", "--user-agent", agent_of("oneoff"),
        "--resolve", str(cluster.root / "hosts.txt"), "--allow-network", "127.0.0.0/8",
        "--delay", str(cluster.delay), "--progress", "none", "--linger", "0",
        "--max-pages", "1", "--lease-ttl", "3", *extra, *cluster.server.web.seeds(),
    ]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "courtier", *args, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        _, err = await proc.communicate()
    finally:  # a failed or timed-out test leaves no crawler behind
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, err.decode(errors="replace")


async def _w0_owns_everything(cluster: Cluster) -> None:
    async def owns() -> bool:
        owners = await cluster.owners()
        return len(owners) == SHARD_COUNT and set(owners.values()) == {"w0"}

    await wait_for("w0 owning every shard", owns)


@pytest.mark.parametrize("pages_per_host", [30])
async def test_a_crawl_on_a_live_clusters_store_refuses_naming_its_workers(
        cluster: Cluster) -> None:
    await cluster.start("w0", *cluster.server.web.seeds())
    await _w0_owns_everything(cluster)
    before = await cluster.view()

    code, err = await one_off_crawl(cluster)

    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("courtier: error: --store has 1 live worker(s): w0 (host "), err
    assert "--join" in lines[0]
    # it did nothing: no request of its own, no lease, no handover, w0 still owns everything
    assert cluster.requests_by("oneoff") == []
    after = await cluster.view()
    assert after.handovers == before.handovers
    assert "oneoff" not in {w.worker_id for w in after.workers}
    assert set((await cluster.owners()).values()) == {"w0"}
    assert cluster.workers["w0"].alive


@pytest.mark.parametrize("pages_per_host", [30])
async def test_with_join_the_crawl_joins_the_cluster_and_fetches(cluster: Cluster) -> None:
    await cluster.start("w0", *cluster.server.web.seeds())
    await _w0_owns_everything(cluster)

    code, err = await one_off_crawl(cluster, "--join")

    assert code == 0, err
    # it took shards from w0 (graceful handovers) and fetched its one page from them
    pages = [r for r in cluster.requests_by("oneoff") if not r.path_qs.startswith("/robots")]
    assert len(pages) == 1, pages
    assert (await cluster.view()).handovers.get("graceful", 0) > 0
    assert cluster.workers["w0"].alive
    assert cluster.violations() == []
