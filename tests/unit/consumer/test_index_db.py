"""The index file: pages and cursor in one transaction, one row per URL, revisits
(consumer/index_db.py).

Checked by breaking it: with the cursor written and committed in a transaction of its
own before the batch's pages, test_a_crash_inside_a_batch_leaves_neither_rows_nor_cursor
fails (cursor 2 with no page after the crash)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from courtier.consumer.index_db import CursorMoved, PageEntry, Removal, Reuse, SearchIndex
from courtier.core.errors import ConfigError
from courtier.core.shard_cursor import ShardCursor


def at(n: int) -> ShardCursor:
    """The cursor after ``n`` events of shard 0."""
    return ShardCursor({0: n})


def page(n: int, version: int = 1, text: str = "polite words", digest: str | None = None,
         title: str | None = None) -> PageEntry:
    return PageEntry(url_key=f"{n:032x}", url=f"http://a.test/{n}", version=version,
                     title=title or f"page {n}", text=text,
                     payload_digest=digest or f"sha256:{n}", fetched_at=100.0 + n)


def rows(index: SearchIndex) -> list[tuple[str, str | None, str]]:
    return index.db.execute(
        "SELECT p.url, p.title, t.body FROM pages AS p JOIN page_text AS t "
        "ON t.rowid = p.id ORDER BY p.url").fetchall()


@pytest.fixture
def index(tmp_path: Path) -> SearchIndex:
    opened = SearchIndex.open(tmp_path / "search.db", create=True)
    yield opened  # type: ignore[misc]
    opened.close()


def test_a_batch_sets_its_cursor_with_its_pages(index: SearchIndex) -> None:
    assert index.cursor() == at(0)
    done = index.apply([page(1), page(2)], at(0), at(7))
    assert done["indexed"] == 2
    assert index.cursor() == at(7)
    assert [r[0] for r in rows(index)] == ["http://a.test/1", "http://a.test/2"]


def test_a_crash_inside_a_batch_leaves_neither_rows_nor_cursor(tmp_path: Path) -> None:
    """A process dies (no rollback, no close) after the first page of a batch was written
    inside the transaction: reopened, the index has neither that page nor the cursor."""
    path = tmp_path / "search.db"
    SearchIndex.open(path, create=True).close()
    script = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from courtier.consumer.index_db import PageEntry, SearchIndex
        from courtier.core.shard_cursor import ShardCursor
        index = SearchIndex.open(Path({str(path)!r}), create=True)
        written = []
        real_put = index._put
        def put(*args):
            real_put(*args)
            written.append(args)
            if len(written) == 2:
                os._exit(9)  # dies mid-transaction
        index._put = put
        entries = [PageEntry(f"{{n:032x}}", f"http://a.test/{{n}}", 1, "t", "text",
                             f"sha256:{{n}}", 1.0) for n in range(3)]
        index.apply(entries, ShardCursor(), ShardCursor({{0: 2}}))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert result.returncode == 9, result.stderr.decode()
    index = SearchIndex.open(path, create=True)
    try:
        assert index.cursor() == at(0)
        assert index.page_count() == 0
        assert rows(index) == []
    finally:
        index.close()


def test_a_failing_change_rolls_the_whole_batch_back(index: SearchIndex,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    index.apply([page(1)], at(0), at(1))

    def broken(url_key: str) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(index, "_remove", broken)
    with pytest.raises(sqlite3.OperationalError):
        index.apply([page(2), Removal(f"{1:032x}", 2)], at(1), at(3))
    assert index.cursor() == at(1)
    assert [r[0] for r in rows(index)] == ["http://a.test/1"]


def test_a_batch_read_from_a_stale_cursor_changes_nothing(index: SearchIndex) -> None:
    index.apply([page(1)], at(0), at(4))
    with pytest.raises(CursorMoved) as caught:
        index.apply([page(2)], at(0), at(3))  # another indexer took events 1-4 meanwhile
    assert caught.value.found == at(4)
    assert index.cursor() == at(4)
    assert index.page_count() == 1


def test_one_row_per_url_the_newest_capture_wins(index: SearchIndex) -> None:
    index.apply([page(1, version=2, text="second edition")], at(0), at(1))
    index.apply([page(1, version=3, text="third edition")], at(1), at(2))
    done = index.apply([page(1, version=2, text="late reparse of the second")], at(2), at(3))
    assert done["stale"] == 1
    assert rows(index) == [("http://a.test/1", "page 1", "third edition")]
    index.apply([page(1, version=3, text="reparse of the third")], at(3), at(4))  # same one
    assert rows(index) == [("http://a.test/1", "page 1", "reparse of the third")]
    assert index.db.execute("SELECT count(*) FROM page_text").fetchone()[0] == 1


def test_removal(index: SearchIndex) -> None:
    index.apply([page(1), page(2)], at(0), at(2))
    index.apply([Removal(f"{1:032x}", 2)], at(2), at(3))
    assert [r[0] for r in rows(index)] == ["http://a.test/2"]
    assert index.db.execute("SELECT count(*) FROM page_text").fetchone()[0] == 1


def test_a_revisit_copies_the_text_of_its_payload_in_any_order(index: SearchIndex) -> None:
    mirror = Reuse(f"{9:032x}", "http://a.test/mirror", 1, "sha256:same", 5.0)
    other = Reuse(f"{8:032x}", "http://a.test/other", 1, "sha256:same", 6.0)
    # the revisit comes first: it waits for its payload
    assert index.apply([mirror], at(0), at(1))["waiting"] == 1
    assert index.page_count() == 0
    done = index.apply([page(1, text="the shared text", digest="sha256:same",
                             title="about"), other], at(1), at(3))
    assert done == {"indexed": 1, "copied": 2}
    assert rows(index) == [("http://a.test/1", "about", "the shared text"),
                           ("http://a.test/mirror", "about", "the shared text"),
                           ("http://a.test/other", "about", "the shared text")]
    assert index.db.execute("SELECT count(*) FROM waiting").fetchone()[0] == 0


def test_a_304_keeps_the_urls_text(index: SearchIndex) -> None:
    index.apply([page(1, text="kept text")], at(0), at(1))
    done = index.apply([Reuse(f"{1:032x}", "http://a.test/1", 2, "sha256:1", 50.0)],
                       at(1), at(2))
    assert done["kept"] == 1
    assert rows(index) == [("http://a.test/1", "page 1", "kept text")]


def test_search_refuses_a_missing_file_and_a_file_that_is_no_index(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no search index here"):
        SearchIndex.open(tmp_path / "nope.db", create=False)
    (tmp_path / "notes.txt").write_text("hello, this is not SQLite at all " * 10)
    with pytest.raises(ConfigError, match="not a courtier search index"):
        SearchIndex.open(tmp_path / "notes.txt", create=True)
    other = sqlite3.connect(tmp_path / "other.db")
    other.execute("CREATE TABLE t (x)")
    other.close()
    with pytest.raises(ConfigError, match="not a courtier search index"):
        SearchIndex.open(tmp_path / "other.db", create=True)
    with pytest.raises(ConfigError, match="does not exist"):
        SearchIndex.open(tmp_path / "no-such-folder" / "s.db", create=True)
