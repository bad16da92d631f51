"""The consumer's loop over a feed held in memory (consumer/indexer.py).

Checked by breaking it: without the commit of the events before an unreadable record,
test_an_unreadable_record_stops_after_the_events_before_it_are_committed fails (cursor
0); with a feed failure raised in follow mode, the follow test fails."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from courtier.consumer.index_db import PageEntry, SearchIndex
from courtier.consumer.indexer import Indexer
from courtier.core.errors import ArchiveError, CourtierError
from courtier.core.shard_cursor import ShardCursor
from courtier.events.drain import ShardFeedPage
from courtier.store.shard_reads import advance, plan_reads


def event(n: int, shard: int = 0, pos: int | None = None, **payload: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kind": "fetch", "outcome": "ok", "mime": "text/html", "truncated": None,
        "robots": {"noindex": False}, "url": f"http://a.test/{n}",
        "warc": {"file": "a.warc.gz", "offset": n * 100, "length": 100, "revisit": False},
        "payload_digest": f"sha256:{n}", "fetched_at": float(n), "title": f"page {n}",
    }
    base.update(payload)
    return {"id": n, "url_key": f"{n:032x}", "version": 1, "payload": base, "shard": shard,
            "shard_pos": n if pos is None else pos}


def at(n: int) -> ShardCursor:
    return ShardCursor({0: n})


class Feed:
    """The outbox in memory, read by shard as ``GET /v1/events?cursor=`` does (the heads
    are the highest positions of ``events``, or ``heads`` where given: positions taken
    whose events are not committed yet); ``fail_next`` calls raise as a feed that is
    down."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.heads: dict[int, int] = {}
        self.fail_next = 0
        self.calls: list[tuple[ShardCursor, int]] = []

    async def __call__(self, cursor: ShardCursor, limit: int) -> ShardFeedPage:
        self.calls.append((cursor, limit))
        if self.fail_next:
            self.fail_next -= 1
            raise CourtierError("--api 127.0.0.1:1: connection refused")
        heads = dict(self.heads)
        for e in self.events:
            heads.setdefault(e["shard"], 0)
            if e["shard"] not in self.heads:
                heads[e["shard"]] = max(heads[e["shard"]], e["shard_pos"])
        ranges = plan_reads(cursor, heads, limit)
        chosen = sorted((e for e in self.events for r in ranges
                         if e["shard"] == r.shard and r.after < e["shard_pos"] <= r.through),
                        key=lambda e: (e["shard"], e["shard_pos"]))
        return ShardFeedPage(chosen, advance(cursor, ranges))


class Pages:
    """Stands for the archive: a page's text is its URL's; ``unreadable`` ids raise."""

    def __init__(self) -> None:
        self.unreadable: set[int] = set()

    async def entry(self, ev: dict[str, Any]) -> PageEntry:
        if ev["id"] in self.unreadable:
            raise ArchiveError(f"record a.warc.gz@{ev['id'] * 100} not readable")
        p = ev["payload"]
        return PageEntry(ev["url_key"], p["url"], ev["version"], p["title"],
                         f"text of {p['url']}", p["payload_digest"], p["fetched_at"])


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SearchIndex]:
    opened = SearchIndex.open(tmp_path / "search.db", create=True)
    yield opened
    opened.close()


def urls(index: SearchIndex) -> list[str]:
    return [row[0] for row in index.db.execute("SELECT url FROM pages ORDER BY id")]


def feed_of_seven() -> Feed:
    return Feed([event(1), event(2, mime="image/png"), event(3), event(4, outcome="gone"),
                 event(5), event(6, outcome="robots_denied", warc=None), event(7)])


async def test_batches_until_caught_up(index: SearchIndex) -> None:
    feed = feed_of_seven()
    report = await Indexer(feed, Pages(), index, batch=3).run()  # type: ignore[arg-type]
    assert feed.calls == [(at(0), 3), (at(3), 3), (at(6), 3), (at(7), 3)]
    assert index.cursor() == at(7) and report.cursor == at(7) and report.events == 7
    assert urls(index) == ["http://a.test/1", "http://a.test/3", "http://a.test/5",
                           "http://a.test/7"]
    assert report.done == {"indexed": 4}
    assert report.skipped == {"not HTML": 1, "robots_denied": 1}
    assert "7 events read: 4 indexed; 2 skipped" in report.line(4)


async def test_an_unreadable_record_stops_after_the_events_before_it_are_committed(
        index: SearchIndex) -> None:
    feed, pages = feed_of_seven(), Pages()
    pages.unreadable = {5}
    indexer = Indexer(feed, pages, index, batch=10)  # type: ignore[arg-type]
    with pytest.raises(ArchiveError, match="not readable"):
        await indexer.run()
    assert index.cursor() == at(4)
    assert (indexer.report.events, indexer.report.cursor) == (4, at(4))  # the summary says so
    assert urls(index) == ["http://a.test/1", "http://a.test/3"]
    pages.unreadable = set()  # the archive is back: the next run takes up from event 5
    report = await Indexer(feed, pages, index, batch=10).run()  # type: ignore[arg-type]
    assert feed.calls[-2] == (at(4), 10)
    assert report.done == {"indexed": 2}
    assert urls(index) == ["http://a.test/1", "http://a.test/3", "http://a.test/5",
                           "http://a.test/7"]


async def test_follow_rides_out_a_failing_feed_and_takes_new_events(index: SearchIndex) -> None:
    feed = feed_of_seven()
    feed.fail_next = 2
    stop = asyncio.Event()
    seen: list[int] = []

    def on_batch(report: Any) -> None:
        seen.append(report.cursor.position(0))
        if report.cursor == at(7) and len(feed.events) == 7:
            feed.events.append(event(8))  # the crawl goes on
        if report.cursor == at(8):
            stop.set()

    indexer = Indexer(feed, Pages(), index, batch=5)  # type: ignore[arg-type]
    await indexer.run(follow=True, stop=stop, poll=0.001, on_batch=on_batch)
    assert seen == [5, 7, 8]
    assert index.cursor() == at(8)
    assert urls(index)[-1] == "http://a.test/8"


async def test_a_feed_failure_without_follow_is_raised(index: SearchIndex) -> None:
    feed = feed_of_seven()
    feed.fail_next = 1
    with pytest.raises(CourtierError, match="connection refused"):
        await Indexer(feed, Pages(), index).run()  # type: ignore[arg-type]
    assert index.cursor() == ShardCursor()
