"""``GET /v1/cluster`` and ``courtier cluster``: live workers, shards per worker, epochs,
lease ages and handovers, read from the store (PostgreSQL for the CLI, over HTTP for the
API), and run-time seeds written as scope rules every worker sees."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient, TestServer

from courtier.api.control import StoreOnlyControl
from courtier.api.server import make_app
from courtier.cli.main import main
from courtier.core.config import CrawlConfig
from courtier.crawl.metrics import CrawlMetrics
from courtier.store.base import Store
from courtier.store.memory import MemoryStore
from courtier.store.postgres import PostgresStore


async def two_workers_one_handover(store: Store) -> None:
    """w1 and w2 live, a gone worker's row stale; w1 holds 0-3, w2 holds 4-5 and took
    shard 3's twin (shard 6) from w1 gracefully."""
    now = await store.store_now()
    await store.heartbeat("w1", 1.0, {"api": "127.0.0.1:8001"}, now)
    await store.heartbeat("w2", 2.0, {"api": "127.0.0.1:8002"}, now)
    await store.heartbeat("gone", 1.0, {}, now - 3600)
    await store.acquire_shards("w1", [0, 1, 2, 3, 6], now, 3600)
    await store.acquire_shards("w2", [4, 5], now, 3600)
    await store.release_shards("w1", [6])
    await store.acquire_shards("w2", [6], await store.store_now(), 3600)


def check(answer: dict[str, Any], live_gone: bool) -> None:
    by_id = {w["worker_id"]: w for w in answer["workers"]}
    assert sorted(by_id) == ["gone", "w1", "w2"]
    assert (by_id["w1"]["shards"], by_id["w1"]["shard_list"]) == (4, [0, 1, 2, 3])
    assert (by_id["w2"]["shards"], by_id["w2"]["shard_list"]) == (3, [4, 5, 6])
    assert by_id["w2"]["max_epoch"] == 2 and by_id["w1"]["max_epoch"] == 1
    assert by_id["w1"]["live"] and by_id["w2"]["live"]
    assert by_id["gone"]["live"] is live_gone and by_id["gone"]["shards"] == 0
    assert by_id["w2"]["info"] == {"api": "127.0.0.1:8002"}
    assert by_id["w1"]["lease_age_min"] >= 0
    assert answer["shards"]["held"] == 7
    assert answer["handovers"] == {"graceful": 1, "takeover": 0}


def test_cli_shows_the_cluster_of_a_postgresql_store(
        capsys: pytest.CaptureFixture[str], tmp_path: Any, pg_dsn: str) -> None:
    async def setup() -> None:
        store = PostgresStore(pg_dsn)
        await store.open()
        try:
            await two_workers_one_handover(store)
        finally:
            await store.close()
        # PostgreSQL stamps heartbeats with its own clock: age the stale worker by hand
        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.execute("UPDATE workers SET heartbeat_at = heartbeat_at - 3600"
                               " WHERE worker_id = 'gone'")
        finally:
            await conn.close()

    asyncio.run(setup())
    code = main(["cluster", "--store", pg_dsn, "--data", str(tmp_path), "--json"])
    out = capsys.readouterr().out
    assert code == 0
    check(json.loads(out), live_gone=False)
    code = main(["cluster", "--store", pg_dsn, "--data", str(tmp_path)])
    text = capsys.readouterr().out
    assert code == 0
    assert "2 live worker(s); 7 shards held" in text
    assert "handovers so far: 1 graceful, 0 takeover" in text
    assert "127.0.0.1:8002" in text
    # a long liveness window counts the stale worker as live
    main(["cluster", "--store", pg_dsn, "--data", str(tmp_path), "--json",
          "--worker-ttl", "7200"])
    check(json.loads(capsys.readouterr().out), live_gone=True)


async def test_api_answers_the_cluster_and_refuses_a_bad_ttl() -> None:
    store = MemoryStore()
    await two_workers_one_handover(store)
    app = make_app(StoreOnlyControl(store, CrawlConfig()), CrawlMetrics().render, token=None)
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/v1/cluster")
        assert response.status == 200
        check(await response.json(), live_gone=False)
        for bad in ("soon", "-1", "0"):
            response = await client.get(f"/v1/cluster?worker_ttl={bad}")
            assert response.status == 400, bad
            assert "worker_ttl" in (await response.json())["error"]


async def test_seeds_added_at_run_time_become_shared_scope_rules() -> None:
    store = MemoryStore()
    control = StoreOnlyControl(store, CrawlConfig())
    results = await control.add_seeds(["http://news.example.org/", "http://a.example.org/x"],
                                      extend_scope=True)
    assert [r["result"] for r in results] == ["accepted", "accepted"]
    rules = {(r.kind, r.value) for r in await store.scope_rules()}
    assert rules == {("host", "news.example.org"), ("host", "a.example.org"),
                     ("domain", "example.org")}
