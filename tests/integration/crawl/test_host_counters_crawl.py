"""The per-host counters a crawl stores (written every ``HOST_STATS_EVERY`` and at the
stop, crawl/committer.py) count exactly the page requests the test server saw from it,
host by host: none is lost at the stop. (This crawl ends within ``HOST_STATS_EVERY``, so
the stop writes them all; tests/unit/crawl/test_committer_host_counters.py checks the
writes in between and that none is written twice.) Seen red with the stop's flush
leaving the counters to the timer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from courtier.crawl.app import crawl
from courtier.testweb import TestWebServer, default_web
from tests.integration.crawl.test_crawl_testweb import config_for
from tests.integration.crawl.test_query_cli import query


@pytest.mark.timeout(120)
async def test_stored_host_counters_match_the_servers_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    spec = default_web(n_hosts=3, pages_per_host=6, crawl_delay=0.2)
    async with TestWebServer(spec) as server:
        await crawl(config_for(server, data), install_signals=False)  # type: ignore[arg-type]
        netlocs = {seed.split("/")[2] for seed in server.web.seeds()}  # host:port
        seen = {n: sum(1 for r in server.requests_for(n.split(":")[0])
                       if r.path_qs != "/robots.txt") for n in netlocs}
    assert sum(seen.values()) > 0 and len(seen) == 3
    for host, requests in sorted(seen.items()):
        code, domain = await asyncio.to_thread(query, "domain", "stats", host, "--data",
                                               str(data))
        assert code == 0, (host, requests, domain)
        stored = domain["hosts"][0]["stored"]  # type: ignore[index]
        assert (host, stored["fetched"] + stored["errors"]) == (host, requests)
