"""PostgreSQL's outbox counters (migrations 0014 and 0029, ``store/postgres/_event_counts.py``):
the migrations count the events already stored and keep them, and writers on several
connections at once add up exactly, each commit batch's tallies on one row a name of
one of its own shards, and a commit's tally finds each event by one index descent."""

from __future__ import annotations

import asyncio
import json

import asyncpg

from courtier.core.outcome import Outcome
from courtier.store.base import NewUrl
from courtier.store.event_counts import EventCounts
from courtier.store.postgres import PostgresStore, _event_counts, _rows
from courtier.store.postgres._schema import load_migrations, migrate
from tests.integration.store.rows import T0, finished, url_row

PAYLOADS = [
    {"outcome": "ok", "status": 200},
    {"outcome": "redirect", "status": 301},
    {"outcome": "gone", "status": 404},
    {"outcome": "retry", "status": 503},
    {"outcome": "retry", "status": 599},
    {"outcome": "retry", "status": 450},  # 4xx, not rounded to 5xx
    {"outcome": "retry", "status": None},
    {"outcome": "error"},
    {"outcome": "robots_denied", "status": None},
    {"outcome": "blocked", "status": 403},
    {"status": 200},
    {"outcome": "ok", "status": 200.5},
    {"outcome": "http_error", "status": 0},
]


async def test_migration_counts_the_events_already_stored(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await migrate(conn, [m for m in load_migrations() if m.version < 14])
        for n, payload in enumerate(PAYLOADS):
            await conn.execute(
                "INSERT INTO events (shard, url_key, version, created_at, payload)"
                " VALUES (1, $1, 1, 1.0, $2)", bytes([n]) * 16, json.dumps(payload))
        await migrate(conn)
    finally:
        await conn.close()
    reopened = PostgresStore(pg_dsn)
    await reopened.open()
    try:
        counted = await reopened.event_counts()
    finally:
        await reopened.close()
    assert counted == EventCounts.of_payloads(PAYLOADS)
    assert counted.status_mix == {"2xx": 2, "3xx": 1, "4xx": 2, "5xx": 2, "error": 4}


async def test_concurrent_commits_add_up(store: PostgresStore, pg_module_dsn: str) -> None:
    rows = [url_row(f"http://h{i % 23}.test/p{i}") for i in range(400)]
    await store.add_urls(rows)
    leased = await store.load_due(range(1024), T0 + 1, 1000, 1000)
    assert len(leased) == 400
    statuses = {url: (Outcome.OK, 200) if i % 3 else (Outcome.GONE, 404)
                for i, url in enumerate(sorted(r.url for r in rows))}
    commits = [finished(r) for r in rows]
    for c in commits:
        c.outcome, c.status = statuses[c.url]
        c.event = {"status": c.status}
    writers = [PostgresStore(pg_module_dsn, max_size=2) for _ in range(4)]
    for w in writers:
        await w.open()
    try:
        batches = [commits[i::4] for i in range(4)]
        sent = [batch[j:j + 20] for batch in batches for j in range(0, len(batch), 20)]
        await asyncio.wait_for(asyncio.gather(*(
            w.commit(batch[j:j + 20]) for w, batch in zip(writers, batches, strict=True)
            for j in range(0, len(batch), 20))), timeout=60)
    finally:
        for w in writers:
            await w.close()
    counted = await store.event_counts()
    events = await store.read_events(0, 10_000)
    assert counted == EventCounts.of_payloads(e.payload for e in events)
    gone = sum(1 for outcome, _ in statuses.values() if outcome is Outcome.GONE)
    assert counted.events == 400 and counted.outcomes == {"ok": 400 - gone, "gone": gone}
    conn = await asyncpg.connect(pg_module_dsn)
    try:
        per_shard = dict(await conn.fetch(
            "SELECT shard, n FROM event_counts WHERE name = 'events'"))
    finally:
        await conn.close()
    # each batch's tallies on one row a name, of the batch's first shard (a shard it
    # wrote: on Citus a node of the batch); seen red with the tallies of every shard
    expected: dict[int, int] = {}
    for batch in sent:
        first = min(c.shard for c in batch)
        expected[first] = expected.get(first, 0) + len(batch)
    assert per_shard == expected


def _on_distinct_shards(n: int) -> list[NewUrl]:
    rows: dict[int, NewUrl] = {}
    i = 0
    while len(rows) < n:
        row = url_row(f"http://s{i}.test/p")
        rows.setdefault(row.shard, row)
        i += 1
    return list(rows.values())


#: the index scans of the outbox's partitions in this transaction so far
_EVENTS_INDEX_SCANS = (
    "SELECT coalesce(sum(pg_stat_get_xact_numscans(i.indexrelid)), 0) FROM pg_index i"
    " JOIN pg_inherits p ON p.inhrelid = i.indrelid WHERE p.inhparent = 'events'::regclass")


async def test_a_commits_tally_descends_the_outbox_index_once_a_commit(
        store: PostgresStore, pg_module_dsn: str) -> None:
    """The tally after ``courtier_commit`` looks each commit's event up by its key: one
    index descent a commit, however many shards the batch spans. Seen red with
    ``e.shard = ANY(batch's shards)`` beside the join (issue #29): 40,000 descents for
    200 commits over 200 shards, the array an index condition of the inner scan. The
    plan is the generic one, the plan a pooled connection's prepared statement settles
    on after its fifth run, over a day partition of a crawl's size."""
    n = 200
    rows = _on_distinct_shards(n)
    await store.add_urls(rows)
    assert len(await store.load_due(range(1024), T0 + 1, 1000, 1000)) == n
    commits = [finished(r) for r in rows]
    for c in commits:
        c.event = {"status": 200}
    now = T0 + 2
    conn = await asyncpg.connect(pg_module_dsn)
    try:
        # the events of a crawl's day so far, in the partition of the commit's day
        await conn.execute(
            "INSERT INTO events (shard, url_key, version, created_at, payload, shard_pos)"
            " SELECT g % 1024, decode(md5(g::text), 'hex'), 1, $1, '{}', g"
            " FROM generate_series(1, 30000) g", now - 60)
        await conn.execute("ANALYZE events")
        async with conn.transaction():
            await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            xid = await conn.fetchval(
                "SELECT pg_current_xact_id() FROM courtier_commit($1::courtier_commit[],"
                " '{}'::courtier_new_url[], '{}'::courtier_host_delta[], $2)",
                _rows.commit_rows(commits), now)
            before = await conn.fetchval(_EVENTS_INDEX_SCANS)
            await _event_counts.add_commit_counts(conn, commits, now, xid)
            scans = await conn.fetchval(_EVENTS_INDEX_SCANS) - before
    finally:
        await conn.close()
    assert scans <= 2 * n
    counted = await store.event_counts()
    assert counted.events == n and counted.outcomes == {"ok": n}
