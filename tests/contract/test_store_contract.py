"""The Store contract suite: every Store implementation must pass all of it.

Tests use only the :class:`courtier.store.base.Store` protocol; the ``store`` and
``make_store`` fixtures (tests/contract/conftest.py) run each test against memory,
SQLite and PostgreSQL. Keys carry their shard in their leading bits, as
``courtier.core.urls.shard_of_key`` reads them.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest

from courtier.core.errors import StoreError
from courtier.core.outcome import Outcome
from courtier.core.urls import SHARD_COUNT, shard_of, shard_of_key
from courtier.store.base import (
    FetchCommit,
    HostRecord,
    HostStatsDelta,
    NewUrl,
    ReparseEvent,
    Store,
    UrlState,
)
from tests.contract.conftest import T0, StoreMaker


def key(url: str, shard: int = 1) -> bytes:
    """A 16-byte key whose leading bits name ``shard`` (as ``urls.shard_of_key`` reads them)."""
    digest = hashlib.blake2b(url.encode(), digest_size=16).digest()
    bits = SHARD_COUNT.bit_length() - 1
    head = (shard << (32 - bits)) | (int.from_bytes(digest[:4], "big") & ((1 << (32 - bits)) - 1))
    made = head.to_bytes(4, "big") + digest[4:]
    assert shard_of_key(made) == shard
    return made


def new(
    url: str,
    *,
    shard: int = 1,
    host: str | None = None,
    priority: int = 0,
    depth: int = 0,
    due: float = T0,
) -> NewUrl:
    host_key = host if host is not None else url.split("/", 3)[2]
    return NewUrl(key(url, shard), url, host_key, shard, depth, priority, due, T0)


def done(
    url: str,
    *,
    version: int = 0,
    epoch: int = 0,
    shard: int = 1,
    next_fetch_at: float | None = T0 + 3600,
    **extra: object,
) -> FetchCommit:
    host = url.split("/", 3)[2]
    fields: dict[str, object] = {
        "url_key": key(url, shard),
        "url": url,
        "host_key": host,
        "shard": shard,
        "version": version,
        "epoch": epoch,
        "outcome": Outcome.OK,
        "fetched_at": T0 + 1,
        "next_fetch_at": next_fetch_at,
        "status": 200,
    }
    fields.update(extra)
    return FetchCommit(**fields)  # type: ignore[arg-type]


async def state_of(store: Store, url: str, shard: int = 1) -> int:
    row = await store.get_url(key(url, shard))
    assert row is not None
    return int(row["state"])


# -- intake ------------------------------------------------------------------


async def test_add_urls_counts_new_and_is_idempotent(store: Store) -> None:
    urls = [new(f"http://a.test/{i}") for i in range(5)]
    assert await store.add_urls(urls) == 5
    assert await store.add_urls(urls) == 0
    assert await store.add_urls([*urls[:2], new("http://a.test/new")]) == 1
    assert (await store.counts())["urls"] == 6


async def test_add_urls_leaves_known_rows_untouched(store: Store) -> None:
    await store.add_urls([new("http://a.test/x", priority=1)])
    assert len(await store.load_due([1], T0, 10, 10)) == 1
    await store.add_urls([new("http://a.test/x", priority=9, due=T0 + 99)])
    row = await store.get_url(key("http://a.test/x"))
    assert row is not None
    assert row["state"] == UrlState.SCHEDULED
    assert row["priority"] == 1
    assert row["next_fetch_at"] == T0


async def test_get_url_returns_row_with_hex_key(store: Store) -> None:
    assert await store.get_url(key("http://a.test/none")) is None
    await store.add_urls([new("http://a.test/p", depth=2)])
    row = await store.get_url(key("http://a.test/p"))
    assert row is not None
    assert row["url"] == "http://a.test/p"
    assert row["url_key_hex"] == key("http://a.test/p").hex()
    assert row["depth"] == 2 and row["version"] == 0 and row["state"] == UrlState.QUEUED


# -- refill --------------------------------------------------------------------


async def test_load_due_respects_due_time(store: Store) -> None:
    await store.add_urls([new("http://a.test/now"), new("http://b.test/later", due=T0 + 60)])
    due = await store.load_due([1], T0, 10, 10)
    assert [d.url for d in due] == ["http://a.test/now"]
    later = await store.load_due([1], T0 + 60, 10, 10)
    assert [d.url for d in later] == ["http://b.test/later"]


async def test_load_due_respects_limit(store: Store) -> None:
    await store.add_urls([new(f"http://h{i}.test/") for i in range(10)])
    assert len(await store.load_due([1], T0, 4, 10)) == 4
    assert len(await store.load_due([1], T0, 100, 10)) == 6


async def test_load_due_caps_per_host(store: Store) -> None:
    await store.add_urls([new(f"http://a.test/{i}") for i in range(5)])
    await store.add_urls([new(f"http://b.test/{i}") for i in range(5)])
    due = await store.load_due([1], T0, 100, 2)
    hosts = sorted(d.host_key for d in due)
    assert hosts == ["a.test", "a.test", "b.test", "b.test"]


async def test_load_due_skips_hosts(store: Store) -> None:
    await store.add_urls([new("http://a.test/1"), new("http://b.test/1"), new("http://c.test/1")])
    due = await store.load_due([1], T0, 10, 10, skip_hosts={"a.test", "c.test"})
    assert [d.host_key for d in due] == ["b.test"]
    assert await state_of(store, "http://a.test/1") == UrlState.QUEUED


async def test_load_due_orders_best_first(store: Store) -> None:
    # hosts: best priority first, then earliest due; rows of a host: priority, due, depth
    await store.add_urls(
        [
            new("http://a.test/low", priority=0, due=T0 - 100),
            new("http://b.test/high-late", priority=5, due=T0 - 1),
            new("http://c.test/high-early-deep", priority=5, due=T0 - 50, depth=3),
            new("http://c.test/high-early-shallow", priority=5, due=T0 - 50, depth=1),
            new("http://c.test/high-earlier-low", priority=1, due=T0 - 80),
        ]
    )
    due = await store.load_due([1], T0, 10, 10)
    assert [d.url.rsplit("/", 1)[1] for d in due] == [
        "high-early-shallow",
        "high-early-deep",
        "high-earlier-low",
        "high-late",
        "low",
    ]


async def test_load_due_per_host_cap_keeps_the_best_of_each_host(store: Store) -> None:
    await store.add_urls([new(f"http://a.test/{p}", priority=p) for p in (1, 7, 3)])
    due = await store.load_due([1], T0, 10, 1)
    assert [d.url for d in due] == ["http://a.test/7"]


async def test_load_due_marks_scheduled_once(store: Store) -> None:
    await store.add_urls([new("http://a.test/1"), new("http://a.test/2")])
    first = await store.load_due([1], T0, 10, 10)
    assert len(first) == 2
    assert await store.load_due([1], T0 + 1000, 10, 10) == []
    assert await state_of(store, "http://a.test/1") == UrlState.SCHEDULED
    assert (await store.counts())["scheduled"] == 2


async def test_load_due_only_returns_requested_shards(store: Store) -> None:
    await store.add_urls([new("http://a.test/1", shard=1), new("http://b.test/1", shard=2)])
    due = await store.load_due([2, 3], T0, 10, 10)
    assert [(d.url, d.shard) for d in due] == [("http://b.test/1", 2)]


async def test_reset_scheduled_requeues(store: Store) -> None:
    await store.add_urls([new("http://a.test/1", shard=1), new("http://b.test/1", shard=2)])
    await store.load_due([1, 2], T0, 10, 10)
    assert await store.reset_scheduled([1]) == 1
    assert await state_of(store, "http://a.test/1") == UrlState.QUEUED
    assert await state_of(store, "http://b.test/1", 2) == UrlState.SCHEDULED
    again = await store.load_due([1, 2], T0, 10, 10)
    assert [d.url for d in again] == ["http://a.test/1"]


async def test_release_requeues_with_new_time_without_version_bump(store: Store) -> None:
    await store.add_urls([new("http://a.test/1"), new("http://a.test/2"), new("http://b.test/1")])
    await store.load_due([1], T0, 10, 10)
    await store.commit([done("http://b.test/1")])  # no longer SCHEDULED
    changed = await store.release(
        [(key("http://a.test/1"), T0 + 500), (key("http://b.test/1"), T0 + 1)]
    )
    assert changed == 1
    row = await store.get_url(key("http://a.test/1"))
    assert row is not None
    assert (row["state"], row["version"], row["next_fetch_at"]) == (UrlState.QUEUED, 0, T0 + 500)
    other = await store.get_url(key("http://b.test/1"))
    assert other is not None and other["next_fetch_at"] == T0 + 3600
    assert await state_of(store, "http://a.test/2") == UrlState.SCHEDULED
    assert len(await store.read_events(0, 10)) == 1  # release emits no event
    assert await store.load_due([1], T0 + 499, 10, 10) == []
    assert [d.url for d in await store.load_due([1], T0 + 500, 10, 10)] == ["http://a.test/1"]
    assert await store.release([]) == 0


async def test_seed_urls_are_the_depth_zero_rows(store: Store) -> None:
    assert await store.seed_urls() == []
    await store.add_urls([new("http://a.test/", depth=0), new("http://a.test/deep", depth=1)])
    await store.add_urls([new("http://b.test/", depth=0)])
    assert sorted(await store.seed_urls()) == ["http://a.test/", "http://b.test/"]
    assert len(await store.seed_urls(limit=1)) == 1


async def test_next_due_at(store: Store) -> None:
    assert await store.next_due_at([1]) is None
    await store.add_urls(
        [
            new("http://a.test/1", due=T0 + 30),
            new("http://a.test/2", due=T0 + 10),
            new("http://b.test/1", shard=2, due=T0 + 1),
        ]
    )
    assert await store.next_due_at([1]) == T0 + 10
    assert await store.next_due_at([1, 2]) == T0 + 1
    await store.load_due([1], T0 + 10, 10, 10)  # the T0+10 row is now SCHEDULED
    assert await store.next_due_at([1]) == T0 + 30


async def test_pending_counts_leave_out_rows_waiting_only_for_a_recrawl(store: Store) -> None:
    assert await store.pending_counts([1, 2]) == (0, 0)
    await store.add_urls([new("http://a.test/new"), new("http://a.test/retry"),
                          new("http://a.test/recrawl"), new("http://a.test/gone"),
                          new("http://b.test/new", shard=2)])
    result = await store.commit([
        done("http://a.test/retry", outcome=Outcome.RETRY, failure_count=2,
             next_fetch_at=T0 + 60),
        done("http://a.test/recrawl"),                       # fetched: due again in an hour
        done("http://a.test/gone", next_fetch_at=None),      # retired
    ])
    assert result.applied == 3
    assert await store.pending_counts([1]) == (1, 1)
    assert await store.pending_counts([1, 2]) == (2, 1)
    await store.load_due([2], T0 + 10, 10, 10)  # SCHEDULED rows are in flight, not left
    assert await store.pending_counts([1, 2]) == (1, 1)
    assert await store.pending_counts([]) == (0, 0)


async def test_redirect_chain_travels_from_intake_to_the_refill(store: Store) -> None:
    import dataclasses

    chain = '[{"url": "http://a.test/old", "status": 301}]'
    await store.add_urls([dataclasses.replace(new("http://a.test/new"), redirect_hops=1,
                                              redirect_chain=chain),
                          new("http://a.test/direct")])
    # a redirect target discovered by a commit keeps its chain too
    target = dataclasses.replace(new("http://a.test/next"), redirect_hops=2,
                                 redirect_chain=chain[:-1] + ', {"url": "http://a.test/new",'
                                                             ' "status": 302}]')
    await store.commit([done("http://a.test/direct", new_urls=[target])])
    rows = {d.url: d for d in await store.load_due([1], T0 + 10, 10, 10)}
    assert rows["http://a.test/new"].redirect_chain == chain
    assert rows["http://a.test/next"].redirect_chain == target.redirect_chain
    assert rows["http://a.test/next"].redirect_hops == 2
    assert "http://a.test/direct" not in rows  # fetched: due in an hour


# -- commit ----------------------------------------------------------------------


async def test_commit_applies_once(store: Store) -> None:
    await store.add_urls([new("http://a.test/p")])
    (lease,) = await store.load_due([1], T0, 10, 10)
    result = await store.commit([done(lease.url, version=lease.version, etag='"v1"')])
    assert (result.applied, result.stale) == (1, 0)
    row = await store.get_url(lease.url_key)
    assert row is not None
    assert row["version"] == 1 and row["state"] == UrlState.QUEUED
    assert row["next_fetch_at"] == T0 + 3600 and row["etag"] == '"v1"'
    assert row["last_fetch_at"] == T0 + 1 and row["status"] == 200
    repeat = await store.commit([done(lease.url, version=lease.version, etag='"v2"')])
    assert (repeat.applied, repeat.stale) == (0, 1)
    events = await store.read_events(0, 100)
    assert len(events) == 1
    assert (events[0].url_key, events[0].version) == (lease.url_key, 1)
    row = await store.get_url(lease.url_key)
    assert row is not None and row["version"] == 1 and row["etag"] == '"v1"'


async def test_commit_repeated_within_one_batch_applies_once(store: Store) -> None:
    await store.add_urls([new("http://a.test/p")])
    await store.load_due([1], T0, 10, 10)
    result = await store.commit([done("http://a.test/p"), done("http://a.test/p")])
    assert (result.applied, result.stale) == (1, 1)
    assert len(await store.read_events(0, 10)) == 1


async def test_commits_of_one_row_in_a_batch_apply_in_batch_order(store: Store) -> None:
    await store.add_urls([new("http://a.test/p"), new("http://a.test/q")])
    await store.load_due([1], T0, 10, 10)
    # version 0 then 1: the second sees the first's result, both apply
    result = await store.commit([done("http://a.test/p", version=0, etag='"one"'),
                                 done("http://a.test/p", version=1, etag='"two"')])
    assert (result.applied, result.stale) == (2, 0)
    row = await store.get_url(key("http://a.test/p"))
    assert row is not None and (row["version"], row["etag"]) == (2, '"two"')
    # version 1 before 0: the first is stale when it comes, the second applies
    result = await store.commit([done("http://a.test/q", version=1, etag='"late"'),
                                 done("http://a.test/q", version=0, etag='"now"')])
    assert (result.applied, result.stale) == (1, 1)
    row = await store.get_url(key("http://a.test/q"))
    assert row is not None and (row["version"], row["etag"]) == (1, '"now"')
    events = await store.read_events(0, 10)
    assert sorted((e.url_key, e.version) for e in events) == sorted(
        [(key("http://a.test/p"), 1), (key("http://a.test/p"), 2), (key("http://a.test/q"), 1)])


async def test_a_mixed_batch_applies_exactly_its_current_commits(store: Store) -> None:
    urls = [f"http://h{i % 3}.test/{i}" for i in range(9)]
    await store.add_urls([new(u, shard=1 + i % 2) for i, u in enumerate(urls)])
    await store.load_due([1, 2], T0, 100, 100)
    batch = [done(u, shard=1 + i % 2, version=0 if i % 3 else 5) for i, u in enumerate(urls)]
    batch.append(done("http://h0.test/never-added", shard=2))
    result = await store.commit(list(reversed(batch)))
    assert (result.applied, result.stale) == (6, 4)
    for i, u in enumerate(urls):
        row = await store.get_url(key(u, 1 + i % 2))
        assert row is not None and row["version"] == (1 if i % 3 else 0)
    events = await store.read_events(0, 100)
    assert sorted(e.url_key for e in events) == sorted(
        key(u, 1 + i % 2) for i, u in enumerate(urls) if i % 3)
    assert len({e.id for e in events}) == 6


async def test_commit_with_old_version_is_stale(store: Store) -> None:
    await store.add_urls([new("http://a.test/p")])
    await store.load_due([1], T0, 10, 10)
    assert (await store.commit([done("http://a.test/p", version=0)])).applied == 1
    await store.load_due([1], T0 + 7200, 10, 10)
    old = await store.commit([done("http://a.test/p", version=0, next_fetch_at=None)])
    assert (old.applied, old.stale) == (0, 1)
    row = await store.get_url(key("http://a.test/p"))
    assert row is not None and row["version"] == 1 and row["state"] == UrlState.SCHEDULED
    assert (await store.commit([done("http://a.test/p", version=1)])).applied == 1


async def test_commit_for_unknown_url_is_stale(store: Store) -> None:
    result = await store.commit([done("http://a.test/never-added")])
    assert (result.applied, result.stale) == (0, 1)
    assert await store.get_url(key("http://a.test/never-added")) is None


async def test_commit_with_old_epoch_is_fenced(store: Store) -> None:
    now = await store.store_now()
    assert await store.acquire_shards("A", [1], now, 0) == {1: 1}  # expires at once
    await store.add_urls([new("http://a.test/p")])
    (lease,) = await store.load_due([1], T0, 10, 10)
    assert await store.acquire_shards("B", [1], await store.store_now(), 600) == {1: 2}
    fenced = await store.commit([done(lease.url, epoch=1)])
    assert (fenced.applied, fenced.stale) == (0, 1)
    assert await store.read_events(0, 10) == []
    assert (await store.commit([done(lease.url, epoch=2)])).applied == 1


async def test_commit_event_payload(store: Store) -> None:
    await store.add_urls([new("http://a.test/p")])
    await store.load_due([1], T0, 10, 10)
    await store.commit(
        [done("http://a.test/p", outcome=Outcome.NOT_MODIFIED, event={"title": "Hi", "n": 3})]
    )
    (event,) = await store.read_events(0, 10)
    assert event.payload["url"] == "http://a.test/p"
    assert event.payload["url_key"] == key("http://a.test/p").hex()
    assert event.payload["version"] == 1
    assert event.payload["outcome"] == "not_modified"
    assert event.payload["title"] == "Hi" and event.payload["n"] == 3


async def test_commit_retires_and_retired_rows_are_never_loaded(store: Store) -> None:
    await store.add_urls([new("http://a.test/gone"), new("http://a.test/ok")])
    await store.load_due([1], T0, 10, 10)
    await store.commit(
        [
            done("http://a.test/gone", outcome=Outcome.GONE, status=410, next_fetch_at=None),
            done("http://a.test/ok", next_fetch_at=T0 + 5),
        ]
    )
    assert await state_of(store, "http://a.test/gone") == UrlState.RETIRED
    assert await store.reset_scheduled([1]) == 0
    due = await store.load_due([1], T0 + 10**9, 10, 10)
    assert [d.url for d in due] == ["http://a.test/ok"]
    again = await store.commit([done("http://a.test/gone", version=1)])
    assert (again.applied, again.stale) == (0, 1)
    counts = await store.counts()
    assert counts["retired"] == 1 and counts["fetched"] == 2


async def test_commit_inserts_new_urls_even_when_stale(store: Store) -> None:
    await store.add_urls([new("http://a.test/p"), new("http://a.test/known")])
    await store.load_due([1], T0, 10, 10)
    links = (new("http://a.test/known"), new("http://b.test/fresh", shard=2))
    first = await store.commit([done("http://a.test/p", new_urls=links)])
    assert (first.applied, first.new_urls) == (1, 1)
    more = (new("http://c.test/late", shard=3),)
    stale = await store.commit([done("http://a.test/p", new_urls=more)])
    assert (stale.applied, stale.stale, stale.new_urls) == (0, 1, 1)
    assert await store.get_url(key("http://c.test/late", 3)) is not None
    assert (await store.counts())["urls"] == 4


async def test_payload_location_keeps_the_first_copy(store: Store) -> None:
    await store.add_urls([new("http://a.test/1"), new("http://b.test/2")])
    await store.load_due([1], T0, 10, 10)
    assert await store.payload_location("sha256:abc") is None
    loc: dict[str, Any] = {
        "payload_digest": "sha256:abc",
        "warc_file": "w-0.warc.gz",
        "warc_length": 9,
    }
    await store.commit([done("http://a.test/1", warc_offset=120, **loc)])
    await store.commit([done("http://b.test/2", warc_offset=999, **loc)])
    assert await store.payload_location("sha256:abc") == (
        "w-0.warc.gz",
        120,
        "http://a.test/1",
        T0 + 1,
    )


async def test_commit_applies_host_stats(store: Store) -> None:
    await store.add_urls([new("http://a.test/1")])
    await store.load_due([1], T0, 10, 10)
    delta = HostStatsDelta("a.test", 1, fetched=1, bytes=500, ttfb_sum=0.25, status_2xx=1)
    await store.commit([done("http://a.test/1")], [delta])
    host = await store.load_host("a.test")
    assert host is not None
    assert (host.fetched, host.bytes, host.ttfb_sum) == (1, 500, 0.25)
    only_stats = HostStatsDelta("a.test", 1, errors=2)
    await store.commit([], [only_stats])
    host = await store.load_host("a.test")
    assert host is not None and (host.fetched, host.errors) == (1, 2)


# -- events ------------------------------------------------------------------------------


async def test_read_events_with_cursor(store: Store) -> None:
    urls = [f"http://h{i}.test/" for i in range(5)]
    await store.add_urls([new(u) for u in urls])
    await store.load_due([1], T0, 10, 10)
    await store.commit([done(u) for u in urls[:3]])
    await store.commit([done(u) for u in urls[3:]])
    page1 = await store.read_events(0, 2)
    assert len(page1) == 2
    page2 = await store.read_events(page1[-1].id, 100)
    assert len(page2) == 3
    ids = [e.id for e in page1 + page2]
    assert ids == sorted(ids) and len(set(ids)) == 5
    assert {e.payload["url"] for e in page1 + page2} == set(urls)
    assert await store.read_events(0, 2) == page1
    assert await store.read_events(ids[-1], 10) == []


async def test_reparse_events_are_keyed_on_the_capture_and_parser_version(
    store: Store,
) -> None:
    await store.add_urls([new("http://a.test/p")])
    await store.load_due([1], T0, 10, 10)
    await store.commit([done("http://a.test/p")])
    (fetch_event,) = await store.read_events(0, 10)
    k = key("http://a.test/p")
    first = [ReparseEvent(k, 1, 2, {"kind": "reparse", "links": ["x"]}),
             ReparseEvent(k, 1, 2, {"kind": "reparse", "links": ["dup in one call"]})]
    assert await store.add_reparse_events(first) == 1
    assert await store.add_reparse_events(first[:1]) == 0  # running twice adds nothing
    assert await store.add_reparse_events([ReparseEvent(k, 1, 3, {"v": 3})]) == 1
    events = await store.read_events(0, 10)
    assert [(e.url_key, e.version) for e in events] == [(k, 1)] * 3
    assert events[0] == fetch_event and events[1].payload == {"kind": "reparse", "links": ["x"]}
    assert [e.id for e in events] == sorted(e.id for e in events)
    # a later fetch cycle of the same URL still gets its own fetch event
    await store.load_due([1], T0 + 10**6, 10, 10)
    result = await store.commit([done("http://a.test/p", version=1)])
    assert result.applied == 1 and len(await store.read_events(0, 10)) == 4


async def test_segment_states_round_trip_per_owner(store: Store) -> None:
    await store.save_segment("w1/a.warc.gz", "w1", "spooled", 10)
    await store.save_segment("w2/b.warc.gz", "w2", "spooled", 20)
    await store.save_segment("w1/a.warc.gz", "w1", "verified", 11)
    (a,) = await store.segments("w1")
    assert (a.name, a.owner, a.state, a.size) == ("w1/a.warc.gz", "w1", "verified", 11)
    assert a.created_at <= a.updated_at
    assert [s.name for s in await store.segments(states=["spooled"])] == ["w2/b.warc.gz"]
    assert [s.name for s in await store.segments()] == ["w1/a.warc.gz", "w2/b.warc.gz"]
    with pytest.raises(StoreError):
        await store.save_segment("w1/a.warc.gz", "w1", "bogus", 1)


async def test_requeue_archive_file_resets_only_rows_in_that_file(store: Store) -> None:
    urls = ["http://a.test/1", "http://a.test/2", "http://a.test/3"]
    await store.add_urls([new(u) for u in urls])
    await store.load_due([1], T0, 10, 10)
    files = ["w/lost.warc.gz", "w/lost.warc.gz", "w/kept.warc.gz"]
    await store.commit([
        done(u, warc_file=f, warc_offset=100 * n, warc_length=50, etag='"e"',
             payload_digest=f"sha256:{n}")
        for n, (u, f) in enumerate(zip(urls, files, strict=True))])
    assert await store.payload_location("sha256:0") is not None
    assert await store.requeue_archive_file("w/lost.warc.gz", T0 + 5) == 2
    due = await store.load_due([1], T0 + 5, 10, 10)
    assert sorted(d.url for d in due) == urls[:2]
    assert all(d.etag is None and d.payload_digest is None and d.warc_file is None
               and d.version == 1 for d in due)
    assert await store.payload_location("sha256:0") is None
    assert await store.payload_location("sha256:2") is not None
    kept = await store.get_url(key(urls[2]))
    assert kept is not None and kept["warc_file"] == "w/kept.warc.gz"
    assert len(await store.read_events(0, 10)) == 3  # no event for a requeue


async def test_sitemap_changed_makes_due_only_rows_fetched_before_the_lastmod(
        store: Store) -> None:
    changed, older, retired, fresh = (f"http://a.test/{n}" for n in range(4))
    await store.add_urls([new(u) for u in (changed, older, retired)])
    await store.load_due([1], T0, 10, 10)
    await store.commit([done(changed), done(older), done(retired, next_fetch_at=None)])
    await store.add_urls([new(fresh, due=T0 + 50)])  # never fetched
    events = len(await store.read_events(0, 100))
    items = [(key(changed), T0 + 100), (key(older), T0), (key(retired), T0 + 100),
             (key(fresh), T0 + 100), (key("http://a.test/unknown"), T0 + 100)]
    # fetched at T0 + 1: only the row whose lastmod is later, still QUEUED, is made due
    assert await store.sitemap_changed(items, T0 + 10) == 1
    row = await store.get_url(key(changed))
    assert row is not None
    assert (row["next_fetch_at"], row["sitemap_lastmod"]) == (T0 + 10, T0 + 100)
    assert row["version"] == 1  # no new cycle, no event
    assert len(await store.read_events(0, 100)) == events
    for url, due in ((older, T0 + 3600), (fresh, T0 + 50)):
        other = await store.get_url(key(url))
        assert other is not None and other["next_fetch_at"] == due
    retired_row = await store.get_url(key(retired))
    assert retired_row is not None and retired_row["sitemap_lastmod"] is None
    # the refill sees it: due now, before the never-fetched row that is due later
    assert [d.url for d in await store.load_due([1], T0 + 10, 10, 10)] == [changed]
    # SCHEDULED now: a newer lastmod changes nothing; nor does an empty call
    assert await store.sitemap_changed([(key(changed), T0 + 200)], T0 + 11) == 0
    assert await store.sitemap_changed([], T0 + 11) == 0


# -- hosts -----------------------------------------------------------------------


async def test_robots_round_trip(store: Store) -> None:
    assert await store.load_host("a.test") is None
    record = HostRecord(
        host_key="a.test",
        shard=1,
        robots_status=200,
        robots_body=b"User-agent: *\nDisallow: /private\n",
        robots_fetched_at=T0,
        robots_expires_at=T0 + 86400,
        robots_digest="sha256:r1",
        crawl_delay=2.5,
    )
    await store.save_robots(record)
    loaded = await store.load_host("a.test")
    assert loaded is not None
    assert loaded.robots_body == record.robots_body
    assert (loaded.robots_status, loaded.robots_digest, loaded.crawl_delay) == (
        200,
        "sha256:r1",
        2.5,
    )
    assert (loaded.robots_fetched_at, loaded.robots_expires_at) == (T0, T0 + 86400)
    record.robots_status = 503
    await store.save_robots(record)
    reloaded = await store.load_host("a.test")
    assert reloaded is not None and reloaded.robots_status == 503


async def test_set_policy_round_trip_keeps_robots(store: Store) -> None:
    await store.save_robots(HostRecord("a.test", 1, robots_status=404, crawl_delay=1.0))
    await store.set_policy("a.test", 1, delay=3.0, max_in_flight=2, max_pages=100, blocked=True)
    host = await store.load_host("a.test")
    assert host is not None
    assert (host.policy_delay, host.policy_max_in_flight, host.policy_max_pages) == (3.0, 2, 100)
    assert host.blocked is True
    assert (host.robots_status, host.crawl_delay) == (404, 1.0)
    await store.set_policy(
        "a.test", 1, delay=None, max_in_flight=None, max_pages=None, blocked=False
    )
    host = await store.load_host("a.test")
    assert host is not None and host.policy_delay is None and host.blocked is False
    await store.save_robots(HostRecord("a.test", 1, robots_status=200))
    host = await store.load_host("a.test")
    assert host is not None and host.robots_status == 200 and host.policy_delay is None
    await store.set_policy("b.test", shard_of("b.test"), delay=1.0, max_in_flight=None,
                           max_pages=5, blocked=False)
    other = await store.load_host("b.test")
    assert other is not None and other.shard == shard_of("b.test") and other.policy_max_pages == 5
    assert (await store.counts())["hosts"] == 2


async def test_policies_changed_lists_overridden_hosts(store: Store) -> None:
    await store.save_robots(HostRecord("quiet.test", 1, robots_status=200))
    assert await store.policies_changed(T0 - 1) == []
    await store.set_policy("slow.test", 2, delay=9.0, max_in_flight=None, max_pages=None,
                           blocked=False)
    changed = await store.policies_changed(T0 - 1)
    assert [(h.host_key, h.policy_delay) for h in changed] == [("slow.test", 9.0)]
    assert await store.policies_changed(T0) == []  # nothing after the store's "now"


async def test_fetch_log_records_each_applied_commit(store: Store) -> None:
    await store.add_urls([new("http://a.test/p"), new("http://a.test/q")])
    first, second = await store.load_due([1], T0, 10, 10)
    await store.commit([done(first.url, robots_digest="abc", delay_applied=1.5)])
    await store.commit([done(first.url)])  # stale: not logged
    await store.commit([done(second.url, outcome=Outcome.GONE, status=404)])
    rows = await store.fetch_log()
    assert [(r["url_key"], r["outcome"]) for r in rows] == [
        (first.url_key.hex(), "ok"), (second.url_key.hex(), "gone")]
    assert (rows[0]["robots_digest"], rows[0]["delay_applied"], rows[0]["version"]) == (
        "abc", 1.5, 1)
    assert await store.fetch_log(after=rows[0]["id"]) == rows[1:]
    only = await store.fetch_log(url_key=second.url_key)
    assert [r["status"] for r in only] == [404]


# -- durability and concurrency ----------------------------------------------------------


async def test_counts(store: Store) -> None:
    await store.add_urls([new(f"http://a.test/{i}") for i in range(4)])
    loaded = await store.load_due([1], T0, 3, 10)
    await store.commit([done(loaded[0].url, next_fetch_at=None)])
    assert await store.counts() == {
        "urls": 4,
        "queued": 1,
        "scheduled": 2,
        "retired": 1,
        "fetched": 1,
        "events": 1,
        "hosts": 0,
    }


async def test_reopen_keeps_everything(make_store: StoreMaker) -> None:
    first = make_store()
    await first.open()
    await first.add_urls([new(f"http://a.test/{i}") for i in range(50)])
    await first.load_due([1], T0, 1, 10)
    epochs = await first.acquire_shards("A", [1], T0, 60)
    await first.commit([done("http://a.test/0", epoch=epochs[1], payload_digest="d")])
    await first.save_robots(HostRecord("a.test", 1, robots_status=200, robots_body=b"x"))
    before = await first.counts()
    await first.close()
    await first.close()  # idempotent
    second = make_store()
    await second.open()
    try:
        assert await second.counts() == before
        row = await second.get_url(key("http://a.test/0"))
        assert row is not None and row["version"] == 1 and row["payload_digest"] == "d"
        assert len(await second.read_events(0, 10)) == 1
        host = await second.load_host("a.test")
        assert host is not None and host.robots_body == b"x"
        # the same owner re-acquiring its unexpired lease keeps the epoch
        assert await second.acquire_shards("A", [1], T0, 60) == {1: 1}
    finally:
        await second.close()


async def test_concurrent_calls_all_succeed(store: Store) -> None:
    batches = [[new(f"http://h{b % 10}.test/{b}/{i}") for i in range(20)] for b in range(50)]
    batches.append(batches[0])  # a duplicate batch adds nothing
    results = await asyncio.wait_for(
        asyncio.gather(*(store.add_urls(batch) for batch in batches)), timeout=20
    )
    assert sum(results) == 50 * 20
    assert sorted(results)[:1] == [0]
    assert (await store.counts())["urls"] == 1000


async def test_concurrent_mixed_calls(store: Store) -> None:
    await store.add_urls([new(f"http://h{i}.test/") for i in range(40)])
    loads = [store.load_due([1], T0, 5, 10) for _ in range(10)]
    counts = asyncio.ensure_future(store.counts())
    results = await asyncio.wait_for(asyncio.gather(*loads), timeout=20)
    loaded = [d.url for batch in results for d in batch]
    assert len(loaded) == 40 and len(set(loaded)) == 40
    assert (await counts)["urls"] == 40


async def test_unreachable_robots_keeps_the_last_good_body(store: Store) -> None:
    await store.save_robots(HostRecord("a.test", 1, robots_status=200, robots_body=b"ok"))
    await store.save_robots(HostRecord("a.test", 1, robots_status=503, robots_body=None))
    host = await store.load_host("a.test")
    assert host is not None and (host.robots_status, host.robots_body) == (503, b"ok")


async def test_backoff_round_trip(store: Store) -> None:
    await store.save_backoff("a.test", 1, T0 + 600)
    host = await store.load_host("a.test")
    assert host is not None and host.backoff_until == T0 + 600


async def test_https_upgrade_round_trip_keeps_the_rest_of_the_host(store: Store) -> None:
    """The https host key an http host upgrades to is kept with the host, beside its
    robots copy and back-off (a later robots or back-off write keeps it), and can be
    cleared. Seen red with load_host not reading the column (None read back)."""
    await store.save_robots(HostRecord("http://a.test", 1, robots_status=200,
                                       robots_body=b"ok"))
    await store.save_https_upgrade("http://a.test", 1, "https://a.test")
    await store.save_backoff("http://a.test", 1, T0 + 600)
    await store.save_robots(HostRecord("http://a.test", 1, robots_status=200,
                                       robots_body=None))
    host = await store.load_host("http://a.test")
    assert host is not None and host.https_upgrade == "https://a.test"
    assert (host.robots_body, host.backoff_until) == (b"ok", T0 + 600)
    await store.save_https_upgrade("http://b.test:8080", 1, "https://b.test:8443")
    other = await store.load_host("http://b.test:8080")
    assert other is not None and other.https_upgrade == "https://b.test:8443"
    await store.save_https_upgrade("http://a.test", 1, None)
    cleared = await store.load_host("http://a.test")
    assert cleared is not None and cleared.https_upgrade is None


async def test_robots_failure_is_kept_with_the_host_and_cleared_by_an_answer(
        store: Store) -> None:
    """Why robots.txt is unreachable (kind, message, since, last) is written with the robots
    fields, read back by ``load_host`` beside the last good copy, and cleared by the next
    answer. Seen red with save_robots leaving the four columns out of the UPDATE (SQLite,
    PostgreSQL: (None, None, None, None) read back; memory not copying the kind: None) and
    with SQLite's load_host not reading robots_error (None read back)."""
    await store.save_robots(HostRecord("https://a.test", 1, robots_status=200,
                                       robots_body=b"User-agent: *\nDisallow: /x\n"))
    message = ("https://a.test/robots.txt: TLS certificate issuer not trusted (unable to get"
               " local issuer certificate); a private CA can be added with --ca-file")
    await store.save_robots(HostRecord(
        "https://a.test", 1, robots_status=200, robots_body=None,
        robots_error_kind="tls_unknown_issuer", robots_error=message,
        robots_error_since=T0, robots_error_at=T0))
    await store.save_robots(HostRecord(
        "https://a.test", 1, robots_status=503, robots_body=None,
        robots_error_kind="http_503", robots_error="robots.txt answered HTTP 503",
        robots_error_since=T0, robots_error_at=T0 + 60))
    await store.save_robots(HostRecord(
        "https://b.test", 1, robots_error_kind="tls_unknown_issuer", robots_error=message,
        robots_error_since=T0 + 1, robots_error_at=T0 + 1))
    host = await store.load_host("https://a.test")
    assert host is not None
    assert (host.robots_error_kind, host.robots_error, host.robots_error_since,
            host.robots_error_at) == ("http_503", "robots.txt answered HTTP 503", T0, T0 + 60)
    assert host.robots_body == b"User-agent: *\nDisallow: /x\n"  # the last good copy stays
    never = await store.load_host("https://b.test")  # failed before any answer
    assert never is not None and never.robots_status is None
    assert (never.robots_error_kind, never.robots_error, never.robots_error_since) == (
        "tls_unknown_issuer", message, T0 + 1)
    await store.save_robots(HostRecord("https://a.test", 1, robots_status=200,
                                       robots_body=b"User-agent: *\n"))
    answered = await store.load_host("https://a.test")
    assert answered is not None
    assert (answered.robots_error_kind, answered.robots_error, answered.robots_error_since,
            answered.robots_error_at) == (None, None, None, None)


async def test_sitemap_hints_round_trip_and_due_within(store: Store) -> None:
    hinted = NewUrl(key("http://a.test/s"), "http://a.test/s", "a.test", 1, 1, 1, T0, T0,
                    sitemap_changefreq="daily", sitemap_lastmod=T0 - 100)
    await store.add_urls([hinted, new("http://a.test/later", due=T0 + 3600)])
    assert await store.due_within([1], T0 + 1) == 1
    assert await store.due_within([1], T0 + 7200) == 2
    assert await store.due_within([2], T0 + 7200) == 0
    (row,) = await store.load_due([1], T0, 10, 10)
    assert (row.sitemap_changefreq, row.sitemap_lastmod) == ("daily", T0 - 100)


async def test_overdue_rows_come_first_and_commits_set_priority(store: Store) -> None:
    week = 7 * 86_400.0
    await store.add_urls([new("http://a.test/hot", priority=5, due=T0),
                          new("http://a.test/old", priority=0, due=T0 - week - 1)])
    first, second = await store.load_due([1], T0, 10, 10)
    assert (first.url, second.url) == ("http://a.test/old", "http://a.test/hot")
    await store.commit([done(second.url, priority=3)])
    row = await store.get_url(second.url_key)
    assert row is not None and row["priority"] == 3
