"""Trap statistics and the near-duplicate index follow a shard to its next owner, across
a crash (kill -9): real ``courtier worker`` processes on PostgreSQL and the test web.

Judged from the test web's request log (who requested which trap page) and the store's
rows (``near_dup_of`` of the pages the new owner fetched).
"""

from __future__ import annotations

import signal

import asyncpg
import pytest

from courtier.core.urls import canonicalize
from courtier.frontier.trap_state import decode_host
from courtier.testweb.server import TestWebServer
from courtier.testweb.spec import HostSpec, WebSpec
from tests.integration.cluster.harness import Cluster, agent_of, stop, wait_for

pytestmark = pytest.mark.timeout(600)

MIN_URLS, MIN_FETCHED, BUDGET, FANOUT = 20, 8, 5, 3
TRAP_FLAGS = [f"--trap=template-min-urls={MIN_URLS}", f"--trap=template-min-fetched={MIN_FETCHED}",
              f"--trap=sample-budget={BUDGET}", "--trap=sample-rate=0.1"]
#: one owner's allowance: the trap's URLs admitted before the throttle (the 8th fetched page
#: throttles it, so the links of 7 pages plus the first one) and then the sample budget
ALLOWANCE = 1 + FANOUT * (MIN_FETCHED - 1) + BUDGET
SLACK = 3  # a page in flight at the kill is fetched again; HyperLogLog's error at 20
#: near-duplicate pages: enough that w0, at the host's Crawl-delay, is still far from done
#: when the trap's throttle is saved (with 40 a loaded run once fetched them all first)
NEAR = 80
#: the hosts' Crawl-delays: the trap's paces how soon w0 has fetched enough of it to save
#: its throttle (about 30 of its requests), the near host's how many of the near pages w0
#: fetched meanwhile; the near host is the faster one by less than before the kill was
#: moved earlier (1.0 s / 0.5 s), so more of its pages are left to the new owner
TRAP_DELAY, NEAR_DELAY = 0.4, 0.25


@pytest.fixture
async def cluster(dsn: str, tmp_path):  # type: ignore[no-untyped-def]
    spec = WebSpec(hosts=[
        HostSpec("trap.test", pages=3, trap_fanout=FANOUT, robots="crawl_delay",
                 crawl_delay=TRAP_DELAY),
        HostSpec("near.test", pages=3, near_duplicates=NEAR, robots="crawl_delay",
                 crawl_delay=NEAR_DELAY),
    ])
    async with TestWebServer(spec) as server:
        c = Cluster(dsn, tmp_path, server, spec, delay=0.15, extra=TRAP_FLAGS)
        await c.open()
        try:
            yield c
        finally:
            await c.close()


async def test_a_crash_moves_trap_statistics_and_near_duplicates_to_the_new_owner(
        cluster: Cluster) -> None:
    assert cluster.store is not None
    store = cluster.store
    trap_host = canonicalize(cluster.server.url("trap.test", "/")).host_key
    near_urls = [cluster.server.url("near.test", f"/near/{k}.html") for k in range(NEAR)]
    await cluster.start("w0", *cluster.server.web.seeds())

    async def throttle_saved() -> bool:
        stored = (await store.load_trap_stats([trap_host])).get(trap_host)
        if stored is None:
            return False
        _, _, templates = decode_host(stored.data)
        return any(stats.since is not None for _, stats in templates)

    async def a_near_page_committed() -> bool:
        for url in near_urls:
            row = await store.get_url(canonicalize(url).url_key)
            if row is not None and row["simhash"] is not None:
                return True
        return False

    await wait_for("the trap's throttle saved by w0", throttle_saved)
    await wait_for("a near-duplicate page committed by w0", a_near_page_committed)
    cluster.workers["w0"].proc.send_signal(signal.SIGKILL)
    await cluster.workers["w0"].proc.wait()
    by_w0 = {cluster.server.url(r.host, r.path_qs) for r in cluster.requests_by("w0")}
    await cluster.start("w1")  # takes every shard over once w0's leases expire

    # what is judged below is the trap's pages and the near pages; the rest of the web (each
    # near page's leaf, as many again at the near host's delay) is not waited for
    async def every_near_page_fetched() -> bool:
        return set(near_urls) <= cluster.fetched()

    await wait_for("every near-duplicate page fetched", every_near_page_fetched)

    async def trap_exhausted() -> bool:
        # every trap URL admitted to the store is fetched and committed: no request to
        # the trap can follow (new ones come only from fetching, through the throttle)
        conn = await asyncpg.connect(cluster.dsn, timeout=10)
        try:
            row = await conn.fetchrow(
                "SELECT count(*) AS stored, count(*) FILTER (WHERE last_fetch_at IS NULL"
                " OR state = 1) AS open FROM urls WHERE host_key = $1 AND url LIKE '%/trap/%'",
                trap_host)
        finally:
            await conn.close()
        assert row is not None
        return int(row["open"]) == 0 and int(row["stored"]) > 0

    await wait_for("every stored trap URL fetched", trap_exhausted)
    await stop(cluster)  # graceful: w1's fetches in flight finish and are committed

    trap = [r for r in cluster.page_log() if r.path_qs.startswith("/trap/")]
    after = [r for r in trap if r.user_agent == agent_of("w1")]
    print(f"trap pages requested: {len(trap)} ({len(after)} by the new owner), "
          f"allowance of one owner {ALLOWANCE}")
    assert after, "the new owner never crawled the trap host: the move was not tested"
    # the new owner continued the old one's throttle: one allowance in all, not two
    assert MIN_URLS <= len(trap) <= ALLOWANCE + SLACK, len(trap)

    near_by_w1 = sorted((r.start, cluster.server.url(r.host, r.path_qs))
                        for r in cluster.requests_by("w1") if r.path_qs.startswith("/near/"))
    assert near_by_w1, "the new owner fetched no near-duplicate page: nothing was tested"
    old_ids = {canonicalize(u).url_key[:8].hex() for u in near_urls if u in by_w0}
    first = await store.get_url(canonicalize(near_by_w1[0][1]).url_key)
    assert first is not None
    # its very first near page is recognised, as a near-duplicate of an old owner's page
    assert first["near_dup_of"] in old_ids, (first["near_dup_of"], near_by_w1[0])
    for _, url in near_by_w1:
        row = await store.get_url(canonicalize(url).url_key)
        assert row is not None and row["near_dup_of"] is not None, url
