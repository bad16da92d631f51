"""The admin API over a live Worker crawling the local test web (real sockets, SQLite)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from courtier.core.urls import canonicalize
from courtier.testweb import default_web
from tests.integration.api.crawl_harness import LiveCrawl, live_crawl


async def until(check: Callable[[], Awaitable[bool] | bool]) -> None:
    """Poll ``check`` every 50 ms until it holds (no deadline of its own: pytest-timeout
    fails a test whose condition never comes, so a loaded machine only makes it slower)."""
    while True:
        result = check()
        if result if isinstance(result, bool) else await result:
            return
        await asyncio.sleep(0.05)


async def get(
    session: aiohttp.ClientSession, crawl: LiveCrawl, path: str, status: int = 200, **kwargs: Any
) -> Any:
    async with session.get(crawl.api_url + path, **kwargs) as response:
        assert response.status == status, await response.text()
        return await response.json()


def authority(url: str) -> str:
    return canonicalize(url).host_key.split("://", 1)[1]


@pytest.mark.timeout(60)
async def test_live_figures_metrics_and_lookups(tmp_path: Path) -> None:
    spec = default_web(n_hosts=3, pages_per_host=8, crawl_delay=0.2)
    async with live_crawl(spec, tmp_path) as crawl, aiohttp.ClientSession() as session:
        await until(lambda: crawl.worker.status.fetched >= 4)
        stats = await get(session, crawl, "/v1/stats")
        assert stats["running"] is True
        assert stats["status"]["fetched"] >= 4 and stats["store"]["urls"] >= 3
        assert stats["politeness"]["violations"] == 0
        assert stats["politeness"]["hosts_known"] == 3
        assert stats["status_mix"].get("2xx", 0) >= 1
        async with session.get(crawl.api_url + "/metrics") as response:
            text = await response.text()
        fetches = [
            s.value
            for f in text_string_to_metric_families(text)
            if f.name == "courtier_fetches"
            for s in f.samples
            if s.name == "courtier_fetches_total"
        ]
        assert sum(fetches) >= 1
        seed = crawl.server.web.seeds()[0]
        domain = await get(session, crawl, f"/v1/domains/{authority(seed)}/stats")
        [host] = domain["hosts"]
        assert host["live"]["robots"]["state"] == "ok"
        assert host["stored"]["robots_status"] == 200
        assert host["live"]["delay"] >= 0.1
        await until(lambda: crawl.worker.status.fetched >= 6)
        state = await get(session, crawl, "/v1/urls", params={"url": seed})
        assert state["robots"] == {
            "source": "live",
            "decision": "allowed",
            "robots_state": "ok",
            "digest": state["robots"]["digest"],
            "unreachable": None,
        }
        assert state["url"]["status"] == 200 and state["history"][0]["status"] == 200
        top = await get(session, crawl, "/v1/hosts/top?by=queue&limit=5")
        assert all(h["live"]["queue"] + h["live"]["in_flight"] > 0 for h in top["hosts"])
        await get(session, crawl, "/v1/hosts/top?by=errors")
        await get(session, crawl, "/v1/domains/unknown.test/stats", status=404)
        page = await get(session, crawl, "/v1/events?after=0&limit=1")
        assert len(page["events"]) == 1
        lag = crawl.worker.metrics.registry.get_sample_value(
            "courtier_outbox_consumer_lag_events")
        assert lag is not None and lag >= 1  # a reader one event in is behind the outbox


@pytest.mark.timeout(60)
async def test_policy_reaches_the_running_frontier_before_the_api_answers(tmp_path: Path) -> None:
    spec = default_web(n_hosts=3, pages_per_host=30, crawl_delay=0.2)
    async with live_crawl(spec, tmp_path) as crawl, aiohttp.ClientSession() as session:
        seeds = crawl.server.web.seeds()
        frontier = crawl.worker.frontier
        slow_key, blocked_key = (canonicalize(s).host_key for s in seeds[:2])
        await until(lambda: frontier.knows_host(slow_key) and frontier.knows_host(blocked_key))
        async with session.put(
            f"{crawl.api_url}/v1/domains/{authority(seeds[0])}/policy", json={"delay": 7.5}
        ) as response:
            assert response.status == 200
            assert slow_key in (await response.json())["applied_live"]
        host = frontier.hosts[slow_key]
        assert frontier.delay_for(host) >= 7.5  # applied before the API answered
        async with session.put(
            f"{crawl.api_url}/v1/domains/{authority(seeds[1])}/policy", json={"blocked": True}
        ) as response:
            assert response.status == 200
        assert frontier.hosts[blocked_key].policy.blocked
        async with session.post(
            crawl.api_url + "/v1/seeds", json={"urls": [seeds[1] + "p/2.html?api=1"]}
        ) as response:
            [result] = (await response.json())["results"]
        assert (result["result"], result["reason"]) == ("rejected", "blocked by policy")
        async with session.delete(
            f"{crawl.api_url}/v1/domains/{authority(seeds[0])}/policy"
        ) as response:
            assert (await response.json())["override"] is False
        assert frontier.hosts[slow_key].policy.delay is None


@pytest.mark.timeout(60)
async def test_seed_added_through_the_api_is_fetched(tmp_path: Path) -> None:
    spec = default_web(n_hosts=2, pages_per_host=3, crawl_delay=0.1)
    async with live_crawl(spec, tmp_path) as crawl, aiohttp.ClientSession() as session:
        await until(lambda: crawl.worker.status.fetched >= 2)
        seed = crawl.server.web.seeds()[0]
        new = seed + "p/1.html?from=api"
        async with session.post(
            crawl.api_url + "/v1/seeds", json=[new, seed, "http://outside.test/"]
        ) as response:
            body = await response.json()
        assert [r["result"] for r in body["results"]] == ["accepted", "duplicate", "rejected"]
        key = canonicalize(new).url_key
        assert await crawl.worker.store.get_url(key) is not None  # durable at once
        await until(lambda: any(r.path_qs == "/p/1.html?from=api" for r in crawl.server.log))
        state = await get(session, crawl, f"/v1/urls/{key.hex()}")
        assert state["url"]["priority"] > 10 and state["url"]["depth"] == 0


@pytest.mark.timeout(30)
async def test_token_is_enforced_on_a_live_crawl(tmp_path: Path) -> None:
    spec = default_web(n_hosts=1, pages_per_host=2, crawl_delay=0.1)
    async with (
        live_crawl(spec, tmp_path, token="t0ken") as crawl,
        aiohttp.ClientSession() as session,
    ):
        body = await get(session, crawl, "/v1/stats", status=401)
        assert "token" in body["error"]
        async with session.post(crawl.api_url + "/v1/seeds", json=["http://a.test/"]) as resp:
            assert resp.status == 401
        stats = await get(session, crawl, "/v1/stats", headers={"Authorization": "Bearer t0ken"})
        assert "status" in stats
