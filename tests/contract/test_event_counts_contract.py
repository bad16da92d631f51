"""Every store keeps the outbox tallies (events, outcomes, status mix) at write time, equal
to a recount of the events it holds: after commits of every kind, stale repeats, re-parse
events added twice, and after the store is closed and opened again."""

from __future__ import annotations

from courtier.core.outcome import Outcome
from courtier.store.base import ReparseEvent, Store
from courtier.store.event_counts import EventCounts
from tests.contract.conftest import T0, StoreMaker
from tests.contract.test_store_contract import done, key, new

PAGES = [
    ("http://a.test/ok", Outcome.OK, 200),
    ("http://a.test/moved", Outcome.REDIRECT, 301),
    ("http://a.test/gone", Outcome.GONE, 404),
    ("http://b.test/busy", Outcome.RETRY, 503),
    ("http://b.test/down", Outcome.RETRY, None),
    ("http://b.test/private", Outcome.ROBOTS_DENIED, None),
    ("http://c.test/ssrf", Outcome.BLOCKED, None),
]


async def recount(store: Store) -> EventCounts:
    events = await store.read_events(0, 10_000)
    return EventCounts.of_payloads(e.payload for e in events)


async def crawl_some(store: Store) -> None:
    await store.add_urls([new(url) for url, _, _ in PAGES])
    leases = await store.load_due([1], T0, 100, 100)
    assert len(leases) == len(PAGES)
    commits = [done(url, outcome=outcome, status=status, event={"status": status})
               for url, outcome, status in PAGES]
    assert (await store.commit(commits[:3])).applied == 3
    assert (await store.commit(commits[3:])).applied == 4
    repeat = await store.commit(commits[:2])  # a replayed batch: stale, no events
    assert (repeat.applied, repeat.stale) == (0, 2)


async def test_counts_match_a_recount_after_commits(store: Store) -> None:
    assert await store.event_counts() == EventCounts()
    await crawl_some(store)
    counted = await store.event_counts()
    assert counted == await recount(store)
    assert counted.events == 7
    assert counted.outcomes == {"ok": 1, "redirect": 1, "gone": 1, "retry": 2,
                                "robots_denied": 1, "blocked": 1}
    assert counted.status_mix == {"2xx": 1, "3xx": 1, "4xx": 1, "5xx": 1, "error": 1}


async def test_reparse_events_count_once(store: Store) -> None:
    await crawl_some(store)
    reparse = [ReparseEvent(key("http://a.test/ok"), 1, 1, {"outcome": "ok", "status": 200}),
               ReparseEvent(key("http://a.test/gone"), 1, 1, {"status": 404})]
    assert await store.add_reparse_events(reparse) == 2
    assert await store.add_reparse_events(reparse) == 0  # already there: nothing counted
    counted = await store.event_counts()
    assert counted == await recount(store)
    assert counted.events == 9
    assert counted.outcomes["ok"] == 2 and counted.outcomes["None"] == 1
    assert counted.status_mix["2xx"] == 2 and counted.status_mix["4xx"] == 2


async def test_counts_survive_reopening(make_store: StoreMaker) -> None:
    first = make_store()
    await first.open()
    try:
        await crawl_some(first)
        before = await first.event_counts()
    finally:
        await first.close()
    second = make_store()
    await second.open()
    try:
        assert await second.event_counts() == before == await recount(second)
    finally:
        await second.close()


async def test_commits_of_one_row_in_a_batch_each_count_their_own_event(store: Store) -> None:
    await store.add_urls([new("http://a.test/p"), new("http://a.test/q")])
    await store.load_due([1], T0, 10, 10)
    # p at version 0 then 1: both apply, two events; q twice at version 0: one applies
    result = await store.commit([
        done("http://a.test/p", version=0, outcome=Outcome.RETRY, status=503,
             event={"status": 503}),
        done("http://a.test/p", version=1, outcome=Outcome.OK, status=200,
             event={"status": 200}),
        done("http://a.test/q", version=0, outcome=Outcome.GONE, status=404,
             event={"status": 404}),
        done("http://a.test/q", version=0, outcome=Outcome.OK, status=200,
             event={"status": 200}),
    ])
    assert (result.applied, result.stale) == (3, 1)
    counted = await store.event_counts()
    assert counted == await recount(store)
    assert counted.events == 3
    assert counted.outcomes == {"retry": 1, "ok": 1, "gone": 1}
