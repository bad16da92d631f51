"""The admin API over StoreOnlyControl (no crawl running): every route, good and bad input."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from courtier.api.control import API_SEED_PRIORITY, StoreOnlyControl
from courtier.api.server import ROUTES, make_app
from courtier.core.config import CrawlConfig
from courtier.core.errors import StoreError
from courtier.core.outcome import Outcome
from courtier.core.shard_cursor import ShardCursor
from courtier.core.urls import canonicalize
from courtier.crawl.metrics import CrawlMetrics
from courtier.store.base import FetchCommit, NewUrl
from courtier.store.memory import MemoryStore

SEED = "http://site-a.test:8080/"
JSON = {"Content-Type": "application/json"}


def row(raw: str, depth: int = 0) -> NewUrl:
    url = canonicalize(raw)
    return NewUrl(url.url_key, url.url, url.host_key, url.shard, depth, 10, 1.0, 1.0)


class BrokenStore(MemoryStore):
    async def counts(self) -> dict[str, int]:
        raise StoreError("disk on fire")


async def fetched_store(store: MemoryStore) -> bytes:
    """A store with one seed fetched (200) and one link discovered."""
    seed = row(SEED)
    await store.add_urls([seed])
    epochs = await store.acquire_shards("t", [seed.shard], 1.0, 60.0)
    [due] = await store.load_due([seed.shard], 2.0, 10, 10)
    await store.commit(
        [
            FetchCommit(
                seed.url_key,
                seed.url,
                seed.host_key,
                seed.shard,
                due.version,
                epochs[seed.shard],
                Outcome.OK,
                3.0,
                100.0,
                status=200,
                title="Home",
                new_urls=[row("http://site-a.test:8080/next", depth=1)],
                event={"url": seed.url, "status": 200, "outcome": "ok"},
            )
        ]
    )
    return seed.url_key


@pytest.fixture
async def memory() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
async def client(memory: MemoryStore) -> AsyncIterator[TestClient[Any, Any]]:
    await fetched_store(memory)
    control = StoreOnlyControl(memory, CrawlConfig())
    app = make_app(control, CrawlMetrics().render, token=None)
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


async def error_of(response: Any, status: int) -> str:
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    body = await response.json()
    assert isinstance(body["error"], str) and body["error"]
    return str(body["error"])


async def test_health_and_unknown_routes_answer_json(client: TestClient[Any, Any]) -> None:
    response = await client.get("/healthz")
    assert response.status == 200 and await response.json() == {"status": "ok"}
    await error_of(await client.get("/v1/nope"), 404)
    await error_of(await client.post("/v1/stats"), 405)


async def test_seeds_answer_per_item_and_store_the_good_ones(
    client: TestClient[Any, Any], memory: MemoryStore
) -> None:
    await memory.set_policy("http://blocked.test", 0, None, None, None, True)
    urls = [
        SEED,
        "http://site-a.test:8080/new#frag",
        "ftp://site-a.test/x",
        "not a url",
        "http://elsewhere.test/",
        42,
        "http://site-a.test:8080/new",
    ]
    response = await client.post("/v1/seeds", json={"urls": urls})
    assert response.status == 200
    body = await response.json()
    results = body["results"]
    assert [r["result"] for r in results] == [
        "duplicate",
        "accepted",
        "rejected",
        "rejected",
        "rejected",
        "rejected",
        "duplicate",
    ]
    assert results[2]["reason"].startswith("bad URL")
    assert results[4]["reason"] == "out of scope: host not in seeds"
    assert (body["accepted"], body["duplicate"], body["rejected"]) == (1, 2, 4)
    stored = await memory.get_url(canonicalize("http://site-a.test:8080/new").url_key)
    assert stored is not None and stored["priority"] == API_SEED_PRIORITY
    assert stored["url"] == results[1]["canonical"] == "http://site-a.test:8080/new"
    # extend_scope admits new hosts; a blocked host is still refused
    response = await client.post(
        "/v1/seeds",
        json={"urls": ["http://elsewhere.test/", "http://blocked.test/a"], "extend_scope": True},
    )
    results = (await response.json())["results"]
    assert [r["result"] for r in results] == ["accepted", "rejected"]
    assert results[1]["reason"] == "blocked by policy"
    assert await memory.get_url(canonicalize("http://elsewhere.test/").url_key) is not None
    assert await memory.get_url(canonicalize("http://blocked.test/a").url_key) is None


@pytest.mark.parametrize(
    "body",
    [
        "{not json",
        '{"urls": "x"}',
        "[]",
        '{"urls": [], "x": 1}',
        '{"urls": ["http://a.test/"], "extend_scope": "yes"}',
    ],
)
async def test_seeds_reject_malformed_bodies(client: TestClient[Any, Any], body: str) -> None:
    await error_of(await client.post("/v1/seeds", data=body, headers=JSON), 400)


async def test_policy_round_trip_is_durable(
    client: TestClient[Any, Any], memory: MemoryStore
) -> None:
    path = "/v1/domains/site-a.test:8080/policy"
    before = await (await client.get(path)).json()
    assert before["override"] is False and before["policy"]["delay"] is None
    response = await client.put(path, json={"delay": 2.5, "max_in_flight": 2, "blocked": False})
    assert response.status == 200
    answer = await response.json()
    assert answer["override"] is True and answer["policy"]["delay"] == 2.5
    assert answer["applied_live"] == []  # no running crawl
    record = await memory.load_host("http://site-a.test:8080")
    assert record is not None and (record.policy_delay, record.policy_max_in_flight) == (2.5, 2)
    https = await memory.load_host("https://site-a.test:8080")
    assert https is not None and https.policy_delay == 2.5
    assert (await (await client.get(path)).json())["policy"]["max_in_flight"] == 2
    response = await client.delete(path)
    assert (await response.json())["override"] is False
    record = await memory.load_host("http://site-a.test:8080")
    assert record is not None and record.policy_delay is None


@pytest.mark.parametrize(
    "body",
    [
        {"delay": -1},
        {"delay": "slow"},
        {"delay": True},
        {"delay": 1e9},
        {"max_in_flight": 0},
        {"max_in_flight": 1.5},
        {"max_pages": -3},
        {"blocked": "yes"},
        {"dealy": 1},
        [1, 2],
    ],
)
async def test_policy_rejects_bad_values(client: TestClient[Any, Any], body: Any) -> None:
    await error_of(await client.put("/v1/domains/site-a.test/policy", json=body), 400)


async def test_policy_rejects_bad_domains_and_bad_json(client: TestClient[Any, Any]) -> None:
    await error_of(await client.get("/v1/domains/a%20b/policy"), 400)
    await error_of(await client.put("/v1/domains/x@y/policy", json={}), 400)
    await error_of(await client.put("/v1/domains/site-a.test/policy", data="{", headers=JSON),
                   400)


async def test_url_state_by_key_and_by_text(
    client: TestClient[Any, Any], memory: MemoryStore
) -> None:
    key = canonicalize(SEED).url_key
    response = await client.get(f"/v1/urls/{key.hex()}")
    assert response.status == 200
    body = await response.json()
    assert body["url"]["url"] == SEED and body["url"]["status"] == 200
    assert body["url"]["url_key"] == key.hex() and body["url"]["state_name"] == "queued"
    assert body["robots"]["source"] == "none" and body["robots"]["decision"] == "unknown"
    assert [h["status"] for h in body["history"]] == [200]
    by_text = await (await client.get("/v1/urls", params={"url": "HTTP://Site-A.test:8080"})).json()
    assert by_text["url"]["url_key"] == key.hex()
    await error_of(await client.get(f"/v1/urls/{'0' * 32}"), 404)
    await error_of(await client.get("/v1/urls/zz"), 400)
    await error_of(await client.get("/v1/urls/abcd"), 400)
    await error_of(await client.get("/v1/urls", params={"url": "mailto:x@y"}), 400)
    await error_of(await client.get("/v1/urls"), 400)


async def test_url_state_uses_the_stored_robots_copy(
    client: TestClient[Any, Any], memory: MemoryStore
) -> None:
    from courtier.store.base import HostRecord

    await memory.save_robots(
        HostRecord(
            "http://site-a.test:8080",
            0,
            robots_status=200,
            robots_body=b"User-agent: *\nDisallow: /next\n",
            robots_expires_at=1e12,
        )
    )
    key = canonicalize("http://site-a.test:8080/next").url_key
    robots = (await (await client.get(f"/v1/urls/{key.hex()}")).json())["robots"]
    assert (robots["source"], robots["decision"]) == ("store", "disallowed")
    home = await (await client.get(f"/v1/urls/{canonicalize(SEED).url_key.hex()}")).json()
    assert home["robots"]["decision"] == "allowed"


async def test_metrics_absent_without_a_crawl() -> None:
    store = MemoryStore()
    key = await fetched_store(store)
    async with TestClient(TestServer(make_app(StoreOnlyControl(store), None, None))) as client:
        body = await (await client.get(f"/v1/urls/{key.hex()}")).json()
        assert [h["outcome"] for h in body["history"]] == ["ok"]
        await error_of(await client.get("/metrics"), 404)


async def test_stats_events_and_domain_stats(client: TestClient[Any, Any]) -> None:
    stats = await (await client.get("/v1/stats")).json()
    assert stats["running"] is False and stats["store"]["urls"] == 2
    assert stats["status_mix"] == {"2xx": 1} and stats["outcomes"] == {"ok": 1}
    assert stats["budget"]["max_pages"] is None
    events = await (await client.get("/v1/events", params={"after": "0", "limit": "10"})).json()
    assert [e["payload"]["status"] for e in events["events"]] == [200]
    assert events["next_after"] == events["events"][0]["id"]
    later = await (await client.get("/v1/events", params={"after": events["next_after"]})).json()
    assert later == {"events": [], "next_after": events["next_after"]}
    for params in ({"limit": "0"}, {"limit": "5000"}, {"after": "-1"}, {"after": "x"}):
        await error_of(await client.get("/v1/events", params=params), 400)
    await error_of(await client.get("/v1/domains/site-a.test:8080/stats"), 404)
    await client.put("/v1/domains/site-a.test:8080/policy", json={"delay": 3})
    domain = await (await client.get("/v1/domains/site-a.test:8080/stats")).json()
    assert domain["hosts"][0]["stored"]["policy"]["delay"] == 3
    assert domain["hosts"][0]["live"] is None
    top = await (await client.get("/v1/hosts/top", params={"by": "queue"})).json()
    assert top == {"by": "queue", "hosts": []}
    await error_of(await client.get("/v1/hosts/top", params={"by": "size"}), 400)


async def test_store_failure_is_503_not_500() -> None:
    app = make_app(StoreOnlyControl(BrokenStore()), None, None)
    async with TestClient(TestServer(app)) as client:
        assert "disk on fire" in await error_of(await client.get("/v1/stats"), 503)


async def test_token_guards_every_call_but_the_static_page(memory: MemoryStore) -> None:
    app = make_app(StoreOnlyControl(memory), CrawlMetrics().render, token="s3cret")
    async with TestClient(TestServer(app)) as client:
        for method, path in (
            ("GET", "/v1/stats"),
            ("POST", "/v1/seeds"),
            ("GET", "/metrics"),
            ("PUT", "/v1/domains/a.test/policy"),
            ("GET", "/healthz"),
        ):
            await error_of(await client.request(method, path), 401)
        bad = {"Authorization": "Bearer wrong"}
        await error_of(await client.get("/v1/stats", headers=bad), 401)
        good = {"Authorization": "Bearer s3cret"}
        assert (await client.get("/v1/stats", headers=good)).status == 200
        page = await client.get("/")
        assert page.status == 200 and "courtier" in await page.text()


async def test_metrics_parse_as_prometheus_text(client: TestClient[Any, Any]) -> None:
    response = await client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    names = {f.name for f in text_string_to_metric_families(await response.text())}
    assert {"courtier_fetches", "courtier_politeness_violations"} <= names


async def test_openapi_lists_every_route(client: TestClient[Any, Any]) -> None:
    response = await client.get("/openapi.json")
    document = json.loads(await response.text())
    assert document["openapi"].startswith("3.1")
    paths = document["paths"]
    for method, path, _ in ROUTES:
        spec_path = path.replace("{url_hash}", "{urlHash}")
        assert method.lower() in paths.get(spec_path, {}), f"{method} {path} not documented"
    documented = {(m.upper(), p) for p, ops in paths.items() for m in ops}
    served = {(m, p.replace("{url_hash}", "{urlHash}")) for m, p, _ in ROUTES}
    assert documented == served


async def test_event_schema_is_served_and_listed_in_the_openapi_document(
    client: TestClient[Any, Any]
) -> None:
    from courtier.events import load_schema

    resp = await client.get("/v1/events/schema")
    assert resp.status == 200
    assert await resp.json() == load_schema()
    document = await (await client.get("/openapi.json")).json()
    assert "/v1/events/schema" in document["paths"]


async def test_events_of_a_registered_consumer(client: TestClient[Any, Any],
                                               memory: MemoryStore) -> None:
    """``?consumer=NAME`` reads after NAME's cursor in the store (registered at 0 when new);
    ``after=N`` acknowledges up to N first, and the cursor never moves backwards. Checked
    by breaking it: with ``after`` read but never stored (control.consumer_events
    registering only), the second read returned the event again."""
    first = await (await client.get("/v1/events", params={"consumer": "feed"})).json()
    [event] = first["events"]
    assert (first["consumer"], first["position"]) == ("feed", 0)
    assert await memory.consumer_position("feed") == 0  # read, not yet acknowledged
    acked = await (await client.get("/v1/events", params={"consumer": "feed",
                                                           "after": event["id"]})).json()
    assert acked["events"] == [] and acked["position"] == event["id"]
    assert await memory.consumer_position("feed") == event["id"]
    again = await (await client.get("/v1/events", params={"consumer": "feed"})).json()
    assert again["events"] == [] and again["position"] == event["id"]  # resumes there
    back = await (await client.get("/v1/events", params={"consumer": "feed", "after": "0"})
                  ).json()
    assert back["events"] == [] and back["position"] == event["id"]  # never backwards
    for name in ("", "two words", "x" * 101):
        await error_of(await client.get("/v1/events", params={"consumer": name}), 400)


async def test_events_below_a_pruned_position_answer_410(client: TestClient[Any, Any],
                                                         memory: MemoryStore) -> None:
    """Once the retention removed event 1, ``after=0`` would skip it silently: the route
    answers 410 naming the oldest readable position and what to do; ``after=1`` and a
    consumer registered since read on without an error. Seen red: with the pruned check
    removed from ``MemoryOutbox.read``, ``after=0`` answered 200 with no events."""
    assert await memory.prune_events(memory.clock.now() + 60, 100) == 1
    message = await error_of(await client.get("/v1/events", params={"after": "0"}), 410)
    assert "events after position 0 were pruned" in message
    assert "oldest position still readable is 2" in message and "--after 1" in message
    answer = await (await client.get("/v1/events", params={"after": "1"})).json()
    assert answer == {"events": [], "next_after": 1}
    late = await (await client.get("/v1/events", params={"consumer": "late"})).json()
    assert (late["events"], late["position"]) == ([], 1)


async def test_events_by_per_shard_cursor_token(client: TestClient[Any, Any],
                                                memory: MemoryStore) -> None:
    """``?cursor=TOKEN`` (empty: from the first) reads above a per-shard cursor and answers
    the token to read on from; a damaged token or one combined with ``after`` is a 400.
    Seen red: with the route answering the cursor it was given (not the page's), the
    second read returned the event again."""
    first = await (await client.get("/v1/events", params={"cursor": ""})).json()
    [event] = first["events"]
    assert event["shard_pos"] == 1 and event["shard"] == row(SEED).shard
    assert first["cursor"].startswith("c1.")
    again = await (await client.get("/v1/events", params={"cursor": first["cursor"]})).json()
    assert again == {"events": [], "cursor": first["cursor"]}
    more = row("http://site-b.test/")
    await memory.add_urls([more])
    await memory.load_due([more.shard], 2.0, 10, 10)
    await memory.commit([FetchCommit(more.url_key, more.url, more.host_key, more.shard, 0, 0,
                                     Outcome.OK, 3.0, 100.0, status=200)])
    later = await (await client.get("/v1/events", params={"cursor": first["cursor"]})).json()
    assert [e["url_key"] for e in later["events"]] == [more.url_key.hex()]
    for bad in ({"cursor": "c1.!!"}, {"cursor": "42"}, {"cursor": "", "after": "1"}):
        await error_of(await client.get("/v1/events", params=bad), 400)


async def test_events_of_a_per_shard_consumer(client: TestClient[Any, Any],
                                              memory: MemoryStore) -> None:
    """``?consumer=NAME&by_shard=1`` registers NAME with a per-shard cursor and reads above
    it; ``cursor=TOKEN`` acknowledges up to the token first; later reads of NAME go by
    shard without ``by_shard``; the retention keeps the event until it is acknowledged; a
    name is of one kind (400 otherwise). Seen red: with ``control.shard_consumer_events``
    registering only (the token never stored), the prune after the acknowledgement
    removed nothing and the next read returned the event again."""
    first = await (await client.get("/v1/events", params={"consumer": "feed",
                                                           "by_shard": "1"})).json()
    [event] = first["events"]
    assert (first["consumer"], first["position"]) == ("feed", ShardCursor().token())
    assert await memory.shard_consumer_position("feed") == ShardCursor()  # not acked yet
    assert await memory.prune_events(memory.clock.now() + 60, 100) == 0  # "feed" holds it
    acked = await (await client.get("/v1/events", params={"consumer": "feed",
                                                           "cursor": first["cursor"]})).json()
    assert acked["events"] == [] and acked["position"] == first["cursor"]
    assert await memory.shard_consumer_position("feed") == \
        ShardCursor({event["shard"]: event["shard_pos"]})
    again = await (await client.get("/v1/events", params={"consumer": "feed"})).json()
    assert again["events"] == [] and again["position"] == first["cursor"]  # by shard
    assert await memory.prune_events(memory.clock.now() + 60, 100) == 1
    await error_of(await client.get("/v1/events", params={"consumer": "feed", "after": "1"}),
                   400)
    await client.get("/v1/events", params={"consumer": "wide"})
    message = await error_of(await client.get(
        "/v1/events", params={"consumer": "wide", "by_shard": "1"}), 400)
    assert "crawl-wide" in message
    await error_of(await client.get("/v1/events", params={"by_shard": "1"}), 400)


async def test_a_shard_cursor_below_pruned_events_answers_410(client: TestClient[Any, Any],
                                                              memory: MemoryStore) -> None:
    """Once the retention removed the only event, ``cursor=`` (from the first) would skip
    it silently: 410 naming the token to read on from, which then reads on. Seen red: with
    ``ShardEventsPruned`` left out of ``failure_of``, the route answered 500."""
    assert await memory.prune_events(memory.clock.now() + 60, 100) == 1
    message = await error_of(await client.get("/v1/events", params={"cursor": ""}), 410)
    assert "were pruned in 1 shard(s)" in message
    token = message.split("--cursor ")[1].split(")")[0]
    answer = await (await client.get("/v1/events", params={"cursor": token})).json()
    assert answer == {"events": [], "cursor": token}
