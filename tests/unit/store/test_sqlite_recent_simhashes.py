"""SQLite's start-up read of fingerprints is one index range a shard (migration 0017).

``load_simhashes`` runs when a worker starts and for every shard it gains. Without an
index in its order it read every row of the shard and sorted the fingerprinted ones, so
a worker's start grew with the known URLs. SQLite's own plan of the store's statement
is the observer: a range of ``urls_recent_simhash``, no sort of its own.
"""

from __future__ import annotations

from pathlib import Path

from courtier.store.sqlite._cluster import RECENT_SIMHASHES
from courtier.store.sqlite._schema import connect, load_migrations, migrate

ROWS = 3_000
FINGERPRINTED = 50


def _plan(path: Path, with_index: bool = True) -> tuple[list[str], list[bytes]]:
    conn = connect(str(path))
    try:
        steps = load_migrations()
        if not with_index:
            steps = steps[:[m.name for m in steps].index("0017_recent_simhashes.sql")]
        migrate(conn, steps)
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO urls (url_key, url, host_key, shard, discovered_at, last_fetch_at,"
            " simhash) VALUES (?, ?, 'h.example:80', 1, 0, ?, ?)",
            [(i.to_bytes(16, "big"), f"http://h.example/{i}",
              float(i) if i < FINGERPRINTED else None, i if i < FINGERPRINTED else None)
             for i in range(ROWS)])
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + RECENT_SIMHASHES, (1, 5))]
        keys = [row[0] for row in conn.execute(RECENT_SIMHASHES, (1, 5))]
        return plan, keys
    finally:
        conn.close()


def test_the_read_is_a_range_of_the_index_in_its_order(tmp_path: Path) -> None:
    plan, keys = _plan(tmp_path / "crawl.sqlite")
    assert any("urls_recent_simhash" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan
    newest = range(FINGERPRINTED - 1, FINGERPRINTED - 6, -1)
    assert keys == [i.to_bytes(16, "big") for i in newest]


def test_without_the_migration_the_read_sorts_the_shard(tmp_path: Path) -> None:
    """The plan above is the index's doing: one migration earlier, the same statement
    reads the shard's rows and sorts them."""
    plan, keys = _plan(tmp_path / "older.sqlite", with_index=False)
    assert any("TEMP B-TREE" in step for step in plan), plan
    assert len(keys) == 5
