"""The admin API against a hostile web page: DNS rebinding (Host), cross-site writes
(Content-Type, Origin, preflight), framing; and bad bodies that must answer 400."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from courtier.api.control import StoreOnlyControl
from courtier.api.server import make_app
from courtier.core.config import CrawlConfig
from courtier.core.urls import canonicalize
from courtier.store.memory import MemoryStore
from courtier.store.sqlite import SqliteStore
from tests.integration.api.test_api_store_only import fetched_store

JSON = {"Content-Type": "application/json"}
NEW_SEED = "http://site-a.test:8080/from-api"


async def _client(store: Any, token: str | None = None,
                  allowed: tuple[str, ...] = ()) -> TestClient[Any, Any]:
    control = StoreOnlyControl(store, CrawlConfig())
    client: TestClient[Any, Any] = TestClient(
        TestServer(make_app(control, None, token, allowed), host="127.0.0.1"))
    await client.start_server()
    return client


@pytest.fixture
async def store() -> MemoryStore:
    memory = MemoryStore()
    await fetched_store(memory)
    return memory


@pytest.fixture
async def client(store: MemoryStore) -> AsyncIterator[TestClient[Any, Any]]:
    test_client = await _client(store, allowed=("crawler.internal",))
    yield test_client
    await test_client.close()


def own_host(client: TestClient[Any, Any]) -> str:
    return f"127.0.0.1:{client.port}"


# ---- Host header: DNS rebinding ----------------------------------------------------------


@pytest.mark.parametrize("host", ["evil.test", "evil.test:8790", "127.0.0.1.evil.test",
                                  "localhost.evil.test", "10.0.0.1", "[::1", "a b"])
async def test_without_token_foreign_host_headers_are_refused(
    client: TestClient[Any, Any], host: str
) -> None:
    for path in ("/v1/stats", "/", "/metrics"):
        response = await client.get(path, headers={"Host": host})
        assert response.status == 421, (host, path)
        assert "error" in await response.json()
    response = await client.put("/v1/domains/site-a.test/policy", json={"blocked": True},
                                headers={"Host": host})
    assert response.status == 421
    answer = await (await client.get("/v1/domains/site-a.test/policy")).json()
    assert answer["policy"]["blocked"] is False  # nothing changed


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST",
                                  "[::1]:{port}", "127.9.9.9", "crawler.internal:443",
                                  "Crawler.Internal"])
async def test_loopback_and_listed_host_headers_are_answered(
    client: TestClient[Any, Any], host: str
) -> None:
    response = await client.get("/v1/stats", headers={"Host": host.format(port=client.port)})
    assert response.status == 200, await response.text()


async def test_with_a_token_the_token_is_the_defence(store: MemoryStore) -> None:
    client = await _client(store, token="s3cret")
    try:
        response = await client.get("/v1/stats", headers={"Host": "evil.test"})
        assert response.status == 401
        response = await client.get(
            "/v1/stats", headers={"Host": "evil.test", "Authorization": "Bearer s3cret"})
        assert response.status == 200
    finally:
        await client.close()


# ---- cross-site writes ---------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", None])
async def test_writes_need_json_content_type(
    client: TestClient[Any, Any], store: MemoryStore, content_type: str | None
) -> None:
    body = json.dumps({"urls": [NEW_SEED], "extend_scope": True})
    headers = {} if content_type is None else {"Content-Type": content_type}
    response = await client.post("/v1/seeds", data=body.encode(), headers=headers)
    assert response.status == 415, await response.text()
    assert await store.get_url(canonicalize(NEW_SEED).url_key) is None  # scope not widened
    response = await client.put("/v1/domains/site-a.test/policy", data=b'{"blocked": true}',
                                headers=headers)
    assert response.status == 415
    response = await client.post("/v1/seeds", data=body, headers={
        "Content-Type": "application/json; charset=utf-8"})
    assert response.status == 200
    assert await store.get_url(canonicalize(NEW_SEED).url_key) is not None


@pytest.mark.parametrize("origin", ["http://evil.test", "null", "http://127.0.0.1:1",
                                    "https://127.0.0.1.evil.test", "not a url"])
async def test_foreign_origin_is_refused(client: TestClient[Any, Any], store: MemoryStore,
                                         origin: str) -> None:
    response = await client.post("/v1/seeds", json={"urls": [NEW_SEED], "extend_scope": True},
                                 headers={"Origin": origin})
    assert response.status == 403, await response.text()
    assert await store.get_url(canonicalize(NEW_SEED).url_key) is None
    response = await client.get("/v1/stats", headers={"Origin": origin})
    assert response.status == 403


async def test_same_origin_and_listed_origin_are_accepted(client: TestClient[Any, Any]) -> None:
    for origin in (f"http://{own_host(client)}", "https://crawler.internal"):
        response = await client.put("/v1/domains/site-a.test/policy", json={"delay": 2.0},
                                    headers={"Origin": origin})
        assert response.status == 200, (origin, await response.text())


async def test_preflight_grants_no_cors_permission(client: TestClient[Any, Any]) -> None:
    for method in ("PUT", "DELETE", "POST"):
        response = await client.options("/v1/domains/site-a.test/policy", headers={
            "Origin": "http://evil.test", "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "content-type"})
        assert response.status >= 400
        assert not any(k.lower().startswith("access-control-") for k in response.headers)


async def test_no_answer_may_be_framed(store: MemoryStore) -> None:
    client = await _client(store, token="s3cret")
    try:
        auth = {"Authorization": "Bearer s3cret"}
        answers = [await client.get("/"), await client.get("/v1/stats", headers=auth),
                   await client.get("/v1/stats"), await client.get("/nowhere", headers=auth),
                   await client.get("/v1/stats", headers={"Host": "evil.test", **auth})]
        for response in answers:
            assert response.headers["X-Frame-Options"] == "DENY"
            assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    finally:
        await client.close()


# ---- bad bodies answer 400, never 500 --------------------------------------------------------


@pytest.mark.parametrize("body", [
    "[" * 100_000 + "]" * 100_000,
    '{"urls": ' + "[" * 100_000 + "]" * 100_000 + "}",
    '{"urls": [' + "[" * 40 + "]" * 40 + "]}",
    '{"urls": ["http://a.test/"], "priority": ' + "9" * 5000 + "}",
    '{"urls": ["http://a.test/"], "priority": "high"}',
    '{"urls": ["http://a.test/"], "priority": 100}',
    '{"urls": ["http://a.test/"], "priority": true}',
])
async def test_hostile_seed_bodies_answer_400(client: TestClient[Any, Any], body: str) -> None:
    response = await client.post("/v1/seeds", data=body, headers=JSON)
    assert response.status == 400, await response.text()
    assert "error" in await response.json()


@pytest.mark.parametrize("policy", [
    {"max_pages": 2**63 + 1}, {"max_pages": 2**64}, {"max_pages": 10**30},
    {"max_in_flight": 2**63}, {"delay": 10**400}, {"delay": "1"}, {"blocked": "yes"},
    {"max_pages": 1.5}, [], "x",
])
async def test_hostile_policies_answer_400_on_sqlite(tmp_path: Path, policy: Any) -> None:
    sqlite = SqliteStore(tmp_path / "courtier.db")
    await sqlite.open()
    client = await _client(sqlite)
    try:
        response = await client.put("/v1/domains/site-a.test/policy", data=json.dumps(policy),
                                    headers=JSON)
        assert response.status == 400, await response.text()
        response = await client.put("/v1/domains/site-a.test/policy",
                                    json={"max_pages": 1_000_000_000}, headers=JSON)
        assert response.status == 200, await response.text()
    finally:
        await client.close()
        await sqlite.close()
