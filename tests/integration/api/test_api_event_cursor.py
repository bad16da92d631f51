"""``GET /v1/events/cursor?at=ID``: the per-shard cursor token of an event id (a crawl-wide
position), the conversion ``courtier index --api`` applies to an old index file. Asked
in process (``routes.invoke``, as the command line without ``--api`` does) and over a
real loopback server with a token: the same answers, the store's own cursor, a bad id a
400, an id the retention passed the store's own error as a 410.

Seen red on scratch breaks: with the operation answering the store's heads (the feed's
end, ``read_events_by_shard``'s cursor) instead of ``shard_cursor_at``, "the cursor
of every id" failed at id 0; with ``failure_of`` leaving ``EventsPruned`` out (the
store error unmapped) the pruned id raised in process instead of answering 410.
"""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from courtier.api.control import StoreOnlyControl
from courtier.api.routes import invoke
from courtier.api.server import make_app
from courtier.core.clock import VirtualClock
from courtier.core.errors import EventsPruned
from courtier.core.shard_cursor import ShardCursor
from courtier.crawl.metrics import CrawlMetrics
from courtier.store.memory import MemoryStore
from tests.contract.conftest import T0
from tests.contract.test_shard_cursor_contract import fetch_round, spread
from tests.contract.test_store_contract import new

TOKEN = "s3cret"


async def _store() -> tuple[MemoryStore, list[int]]:
    """A store whose outbox holds two rounds of fetches in three shards; the event ids."""
    store = MemoryStore(clock=VirtualClock(T0))
    await store.open()
    urls = spread({1: 3, 2: 2, 5: 3})
    await store.add_urls([new(u, shard=s) for u, s in urls])
    await fetch_round(store, urls, 0)
    await fetch_round(store, [u for u in urls if u[1] != 2], 1)
    events = await store.read_events(0, 1000)
    return store, [e.id for e in events]


async def _both(store: MemoryStore, client: TestClient[Any, Any], target: str
                ) -> tuple[int, Any]:
    """The answer in process and over HTTP, checked equal."""
    status, answer = await invoke(StoreOnlyControl(store), "GET", target)
    response = await client.get(target, headers={"Authorization": f"Bearer {TOKEN}"})
    assert (response.status, await response.json()) == (status, answer), target
    return status, answer


async def test_the_cursor_of_every_id_a_bad_id_and_a_pruned_one() -> None:
    store, ids = await _store()
    assert len(ids) == 14
    app = make_app(StoreOnlyControl(store), CrawlMetrics().render, token=TOKEN)
    async with TestClient(TestServer(app)) as client:
        for at in range(max(ids) + 1):  # the store's own conversion, token for token
            status, answer = await _both(store, client, f"/v1/events/cursor?at={at}")
            assert status == 200, answer
            expected = await store.shard_cursor_at(at)
            assert answer == {"at": at, "cursor": expected.token()}
            assert ShardCursor.from_token(answer["cursor"]) == expected
        end = (await store.read_events_by_shard(ShardCursor(), 1000)).cursor
        assert (await _both(store, client, f"/v1/events/cursor?at={max(ids)}"))[1][
            "cursor"] == end.token()

        for bad in ("", "x", "-1", "1.5", str(2**63), "&at=1"):
            target = "/v1/events/cursor" + (f"?at={bad}" if bad != "&at=1" else "?after=1")
            status, answer = await _both(store, client, target)
            assert status == 400, (bad, answer)
            assert "at" in answer["error"]

        unauthorized = await client.get("/v1/events/cursor?at=1")
        assert unauthorized.status == 401

        removed = 0
        for _ in range(10):  # the retention removes the first events (every one is old)
            removed += await store.prune_events(T0 + 10**6, 1000)
            if removed:
                break
        through = await store.events_pruned_through()
        assert removed and through >= min(ids)
        try:
            await store.shard_cursor_at(through - 1)
        except EventsPruned as exc:
            in_process = str(exc)
        else:
            raise AssertionError("the store converted a pruned id")
        status, answer = await _both(store, client, f"/v1/events/cursor?at={through - 1}")
        assert (status, answer) == (410, {"error": in_process})
        assert f"oldest position still readable is {through + 1}" in answer["error"]
        status, answer = await _both(store, client, f"/v1/events/cursor?at={through}")
        assert status == 200 and answer["cursor"] == (
            await store.shard_cursor_at(through)).token()
    await store.close()
