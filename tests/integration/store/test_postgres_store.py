"""PostgreSQL-only behaviour: concurrent writers, the outbox under out-of-order
commits, the refill against a brute-force ranking, the host queue's exactness,
migrations. The shared behaviour is in tests/contract (run on every store)."""

from __future__ import annotations

import asyncio
import random

import asyncpg
import pytest

from courtier.core.errors import StoreError
from courtier.frontier.host import OVERDUE_AFTER
from courtier.store.base import NewUrl, ReparseEvent
from courtier.store.postgres import PostgresStore, _rows
from tests.integration.store.rows import T0, finished, url_row


async def test_concurrent_intake_from_several_connections_is_exact(
    store: PostgresStore, pg_module_dsn: str
) -> None:
    urls = [url_row(f"http://h{i % 37}.test/p{i}") for i in range(3000)]
    writers = [PostgresStore(pg_module_dsn, max_size=2) for _ in range(4)]
    for w in writers:
        await w.open()
    try:
        # overlapping batches in opposite orders: unsorted inserts would deadlock
        batches = [urls[:2000], list(reversed(urls[1000:])), urls[::-1], urls[500:2500]]
        results = await asyncio.wait_for(asyncio.gather(
            *(w.add_urls(b) for w, b in zip(writers, batches, strict=True))), timeout=60)
    finally:
        for w in writers:
            await w.close()
    assert sum(results) == 3000
    assert (await store.counts())["urls"] == 3000
    assert await store.due_within(range(1024), T0 + 1) == 3000
    await _assert_host_queue_exact(pg_module_dsn)


async def _assert_host_queue_exact(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        queue = await conn.fetch("SELECT shard, host_key, next_due_at, best_priority"
                                 " FROM host_queue ORDER BY 1, 2")
        truth = await conn.fetch("SELECT shard, host_key, min(next_fetch_at), max(priority)"
                                 " FROM urls WHERE state = 0 GROUP BY 1, 2 ORDER BY 1, 2")
        levels = await conn.fetch("SELECT shard, host_key, priority, next_due_at"
                                  " FROM host_levels ORDER BY 1, 2, 3")
        level_truth = await conn.fetch(
            "SELECT shard, host_key, priority, min(next_fetch_at) FROM urls"
            " WHERE state = 0 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")
    finally:
        await conn.close()
    assert [tuple(r) for r in queue] == [tuple(r) for r in truth]
    assert [tuple(r) for r in levels] == [tuple(r) for r in level_truth]


async def test_outbox_skips_nothing_when_transactions_commit_out_of_order(
    store: PostgresStore, pg_module_dsn: str
) -> None:
    rows = [url_row(f"http://w{i}.test/") for i in range(6)]
    await store.add_urls(rows)
    await store.load_due(range(1024), T0, 100, 10)
    await store.commit([finished(rows[0])])
    early, late = await asyncpg.connect(pg_module_dsn), await asyncpg.connect(pg_module_dsn)
    delivered = await store.read_events(0, 100)
    assert [e.url_key for e in delivered] == [rows[0].url_key]
    try:
        early_tx, late_tx = early.transaction(), late.transaction()
        await early_tx.start()
        await late_tx.start()
        await early.fetchval("SELECT pg_current_xact_id()")  # older transaction id
        # `late` writes its event first (lower event id) but will commit last
        await late.fetchval("SELECT courtier_commit($1::courtier_commit[], '{}', '{}', $2)",
                            _rows.commit_rows([finished(rows[1])]), T0)
        await early.fetchval("SELECT courtier_commit($1::courtier_commit[], '{}', '{}', $2)",
                             _rows.commit_rows([finished(rows[2])]), T0)
        await early_tx.commit()
        await store.commit([finished(rows[3]), finished(rows[4])])  # newer, committed
        while_open = await store.read_events(delivered[-1].id, 100)
        delivered += while_open
        # the open transaction's event is not visible, so it is not handed out yet;
        # everything committed (older and newer transactions) is
        assert rows[1].url_key not in {e.url_key for e in delivered}
        assert {rows[2].url_key, rows[3].url_key, rows[4].url_key} <= {
            e.url_key for e in while_open}
        await late_tx.commit()
    finally:
        await early.close()
        await late.close()
    await store.commit([finished(rows[5])])
    while page := await store.read_events(delivered[-1].id, 2):
        delivered += page
    keys = [e.url_key for e in delivered]
    # the late commit (lowest event id) arrives after positions already handed out
    assert keys.index(rows[1].url_key) > keys.index(rows[4].url_key)
    assert sorted(keys) == sorted(r.url_key for r in rows)  # all delivered, none twice
    ids = [e.id for e in delivered]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert await store.read_events(ids[-1], 10) == []


def brute_force_refill(rows: list[NewUrl], now: float, limit: int, per_host: int,
                       skip: set[str]) -> list[bytes]:
    """The Store.load_due contract (store/base.py) written out directly over every queued row."""
    overdue = now - OVERDUE_AFTER
    by_host: dict[str, list[NewUrl]] = {}
    for r in rows:
        by_host.setdefault(r.host_key, []).append(r)
    ready = [h for h, q in by_host.items()
             if h not in skip and any(r.next_fetch_at <= now for r in q)]

    def host_rank(h: str) -> tuple[bool, int, float, str]:
        q = by_host[h]
        first = min(r.next_fetch_at for r in q)
        return (not first < overdue, -max(r.priority for r in q), first, h)

    out: list[bytes] = []
    for h in sorted(ready, key=host_rank):
        due = sorted((r for r in by_host[h] if r.next_fetch_at <= now),
                     key=lambda r: (not r.next_fetch_at < overdue, -r.priority,
                                    r.next_fetch_at, r.depth, r.url_key))
        out += [r.url_key for r in due[:min(per_host, limit - len(out))]]
        if len(out) >= limit:
            break
    return out


async def test_refill_matches_brute_force_ranking(
    store: PostgresStore, pg_module_dsn: str
) -> None:
    rng = random.Random(7)
    week = OVERDUE_AFTER
    queued: dict[bytes, NewUrl] = {}
    for i in range(400):
        due = T0 + rng.choice([-week - rng.random() * 1000, -rng.random() * 1000,
                               rng.random() * 1000])
        row = url_row(f"http://h{rng.randrange(25)}.test/{i}", priority=rng.randrange(4),
                      due=due, depth=rng.randrange(3))
        queued[row.url_key] = row
    await store.add_urls(list(queued.values()))
    for step in range(12):
        now = T0 + step * 150
        limit, per_host = rng.randrange(1, 40), rng.randrange(1, 6)
        skip = {f"h{rng.randrange(25)}.test" for _ in range(rng.randrange(3))}
        want = brute_force_refill(list(queued.values()), now, limit, per_host, skip)
        got = await store.load_due(range(1024), now, limit, per_host, skip)
        assert [d.url_key for d in got] == want, f"step {step}"
        for d in got:
            del queued[d.url_key]
        if step % 3 == 2 and got:  # give some back with new times and priorities
            back = got[: len(got) // 2]
            await store.release([(d.url_key, now - rng.random() * 500) for d in back])
            for d in back:
                refreshed = dict(await store.get_url(d.url_key) or {})
                queued[d.url_key] = url_row(d.url, priority=d.priority,
                                            due=refreshed["next_fetch_at"], depth=d.depth)
        await _assert_host_queue_exact(pg_module_dsn)


async def test_shard_that_disagrees_with_the_key_is_refused(store: PostgresStore) -> None:
    row = url_row("http://a.test/")
    wrong = NewUrl(row.url_key, row.url, row.host_key, (row.shard + 1) % 1024, 0, 0, T0, T0)
    with pytest.raises(StoreError, match="names shard"):
        await store.add_urls([wrong])
    assert (await store.counts())["urls"] == 0


async def test_reparse_batch_with_a_payload_that_is_not_json_adds_nothing(
    store: PostgresStore,
) -> None:
    good = ReparseEvent(url_row("http://a.test/").url_key, 1, 1, {"links": []})
    bad = ReparseEvent(url_row("http://b.test/").url_key, 1, 1, {"score": float("nan")})
    with pytest.raises(StoreError, match="not JSON-serialisable"):
        await store.add_reparse_events([good, bad])  # the good one was inserted first
    assert await store.read_events(0, 10) == []
    assert (await store.event_counts()).events == 0
    assert await store.add_reparse_events([good]) == 1


async def test_bulk_copy_intake_matches_add_urls(store: PostgresStore) -> None:
    rows = [url_row(f"http://b{i % 9}.test/{i}", priority=i % 3) for i in range(500)]
    assert await store.add_urls(rows[:100]) == 100
    assert await store.add_urls_bulk(rows) == 400
    assert await store.add_urls_bulk(rows) == 0
    assert (await store.counts())["urls"] == 500
    assert len(await store.load_due(range(1024), T0, 1000, 1000)) == 500


async def test_newer_schema_is_refused_and_reopen_is_idempotent(pg_dsn: str) -> None:
    first = PostgresStore(pg_dsn)
    await first.open()
    version = first.schema_version
    await first.close()
    again = PostgresStore(pg_dsn)
    await again.open()
    assert again.schema_version == version
    await again.close()
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute("INSERT INTO schema_version VALUES ($1, 'from_the_future', 0)",
                           version + 1)
    finally:
        await conn.close()
    with pytest.raises(StoreError, match=f"version {version + 1} but this courtier knows"):
        await PostgresStore(pg_dsn).open()


async def test_lost_connections_are_replaced(store: PostgresStore, pg_module_dsn: str) -> None:
    await store.add_urls([url_row("http://a.test/")])
    await admin_terminate(pg_module_dsn)
    assert (await store.counts())["urls"] == 1  # the server dropped every connection
    await admin_terminate(pg_module_dsn)
    try:
        await store.add_urls([url_row("http://b.test/")])
    except StoreError as exc:  # a write on the dead connection fails cleanly…
        assert "PostgreSQL store" in str(exc) and "add_urls" in str(exc)
        await store.add_urls([url_row("http://b.test/")])  # …the next gets a new one
    assert (await store.counts())["urls"] == 2


async def admin_terminate(dsn: str) -> None:
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                            " WHERE datname = current_database() AND pid <> pg_backend_pid()")
    finally:
        await admin.close()
