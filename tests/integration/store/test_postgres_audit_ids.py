"""The audit log read in id order on PostgreSQL (``Store.fetch_log`` without a URL), whose
day partitions index ``id`` by BRIN (migration 0038): the reader asks for bounded id
windows, widening them across gaps, and still returns exactly the rows above ``after``
in id order, ``limit`` at a time, with none left out.

Seen red: with the reader returning after its first window (no widening), the pages
stopped at id 50 (``[30, 20]``): an export would end at the first gap in the ids."""

from __future__ import annotations

import asyncpg

from courtier.store.postgres import PostgresStore
from tests.integration.store.rows import T0

#: ids with gaps wider than any first window: a sequence's cache lost, Citus node ranges
IDS = [*range(1, 51), *range(10_000, 10_051), 2**40, 2**40 + 7]


async def test_the_id_ordered_audit_read_crosses_gaps_in_the_ids(
    store: PostgresStore, pg_module_dsn: str,
) -> None:
    conn = await asyncpg.connect(pg_module_dsn)
    try:
        await conn.execute(
            "INSERT INTO fetch_log (id, shard, url_key, version, fetched_at, outcome)"
            " SELECT i, i % 1024, int8send(i), 1, $2, 'ok' FROM unnest($1::bigint[]) i",
            IDS, T0)
    finally:
        await conn.close()
    pages: list[list[int]] = []
    after = 0
    for _ in range(len(IDS)):  # bounded: every page holds at least one row
        page = [int(r["id"]) for r in await store.fetch_log(after, 30)]
        if not page:
            break
        pages.append(page)
        after = page[-1]
    assert [len(p) for p in pages] == [30, 30, 30, 13]
    assert [i for p in pages for i in p] == IDS
    assert await store.fetch_log(IDS[-1], 30) == []
    assert [r["id"] for r in await store.fetch_log(2**40, 5)] == [2**40 + 7]
