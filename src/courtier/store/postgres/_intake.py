"""URL intake of the PostgreSQL store: one round trip per batch, COPY for bulk files.

:func:`add_rows` passes the batch as one ``courtier_new_url[]`` parameter to
``courtier_add_urls`` (migration 0018: ``INSERT … SELECT FROM unnest(…) WHERE NOT
EXISTS … ORDER BY shard, url_key``, falling back to ``ON CONFLICT DO NOTHING`` when
another transaction committed one of the keys, plus the host-queue upsert), one
statement from the client's side, sent without ``BEGIN … COMMIT`` (the store calls it
with ``one_statement=True``). :func:`copy_rows` streams a big batch with COPY into a
temporary table first (binary protocol, no per-row statement), then runs the same
function over it in one transaction, so the rules (sorting, conflicts, host queue) are
the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from courtier.store.postgres._rows import Conn

#: batches this big are streamed with COPY (a seed file), smaller ones go as one array
COPY_THRESHOLD = 5000

NEW_URL_COLUMNS = (
    "shard", "url_key", "url", "host_key", "depth", "priority", "discovered_at",
    "next_fetch_at", "redirect_hops", "sitemap_changefreq", "sitemap_lastmod", "redirect_chain",
)


async def add_rows(conn: Conn, rows: Sequence[tuple[Any, ...]]) -> int:
    """Insert rows (``courtier_new_url`` tuples) not yet known; return how many were new."""
    added = await conn.fetchval("SELECT courtier_add_urls($1::courtier_new_url[])", rows)
    return int(added or 0)


async def copy_rows(conn: Conn, rows: Sequence[tuple[Any, ...]]) -> int:
    """COPY rows into a temporary table, then insert the unknown ones from it."""
    await conn.execute(
        "CREATE TEMPORARY TABLE IF NOT EXISTS courtier_incoming"
        " (LIKE courtier_new_url) ON COMMIT DELETE ROWS"
    )
    await conn.copy_records_to_table("courtier_incoming", records=rows, columns=NEW_URL_COLUMNS)
    added = await conn.fetchval(
        "SELECT courtier_add_urls("
        "ARRAY(SELECT ROW(i.*)::courtier_new_url FROM courtier_incoming i))"
    )
    return int(added or 0)
