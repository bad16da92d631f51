"""``courtier index`` over a real embedded crawl of the test web, as a user runs it.

The observer is the test web's own log: every page it answered 200 with an HTML body
must be in the index exactly once, under its title in the test web's model. A consumer
SIGKILLed after its first committed batch (seen by polling the index file) and started
again ends with the same index.

Checked by breaking it: with the cursor committed as soon as a batch is read, before its
pages are read from the archive and committed (consumer/indexer.py), the crash test
failed in 3 of 4 runs — at the kill the index held fewer pages than the events up to its
cursor name, pages the restart never indexes (the 4th kill fell between two batches).
The same break inside one ``apply`` (cursor committed apart, just before the rows) has a
window too short for a kill from outside: tests/unit/consumer/test_index_db.py kills a
process inside the transaction instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from courtier.core.shard_cursor import ShardCursor
from courtier.core.urls import canonicalize
from courtier.crawl.app import crawl
from courtier.store.open import open_store
from courtier.testweb import TestWebServer, default_web
from tests.integration.crawl.test_crawl_testweb import config_for

#: a hang guard only: how long a consumer may take before the test gives up on it
GUARD = 120.0


@dataclass(frozen=True)
class Crawled:
    data: Path
    html: dict[str, str]                 # URL answered 200 text/html -> its model's title
    events: list[tuple[int, int, int, str]]  # (id, shard, shard_pos, URL), in feed order
    end: ShardCursor                     # the feed's cursor after every event

    def taken(self, cursor: ShardCursor) -> set[str]:
        """The URLs of the events at or below ``cursor``."""
        return {url for _, shard, pos, url in self.events if pos <= cursor.position(shard)}


async def _crawl(data: Path, n_hosts: int = 4, pages: int = 8,
                 store: str | None = None) -> Crawled:
    spec = default_web(n_hosts=n_hosts, pages_per_host=pages, crawl_delay=0.2)
    async with TestWebServer(spec) as server:
        await crawl(config_for(server, data, store=store),  # type: ignore[arg-type]
                    install_signals=False)
        web = server.web
        html: dict[str, str] = {}
        for record in server.log:
            if record.method != "GET" or record.status != 200:
                continue
            served = web.page(record.host, record.path_qs)
            if not (served.header("Content-Type") or "").startswith("text/html"):
                continue
            model = web.html_model(record.host, urlsplit(record.path_qs).path)
            assert model is not None, record
            html[canonicalize(server.url(record.host, record.path_qs)).url] = model.title
    opened = await open_store(store, data, must_exist=True)
    try:
        page = await opened.read_events_by_shard(ShardCursor(), 100_000)
    finally:
        await opened.close()
    return Crawled(data, html, [(e.id, e.shard, e.shard_pos, e.payload["url"])
                                for e in page.events], page.cursor)


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Crawled:
    found = asyncio.run(_crawl(tmp_path_factory.mktemp("consumer") / "data"))
    assert len(found.html) >= 30  # the web is big enough for many batches
    return found


def courtier(*args: str) -> list[str]:
    return [sys.executable, "-m", "courtier", *args]


def index_rows(path: Path) -> tuple[list[tuple[str, str]], int, set[str], ShardCursor]:
    """(url, title) of every page row, FTS rows, URLs waiting for a payload, cursor."""
    db = sqlite3.connect(path)
    try:
        pages = db.execute("SELECT url, title FROM pages ORDER BY url").fetchall()
        texts = db.execute("SELECT count(*) FROM page_text").fetchone()[0]
        waiting = {row[0] for row in db.execute("SELECT url FROM waiting")}
        cursor = ShardCursor.from_token(
            db.execute("SELECT value FROM meta WHERE key = 'cursor'").fetchone()[0])
    finally:
        db.close()
    return pages, texts, waiting, cursor


def assert_every_page_once(crawled: Crawled, path: Path) -> None:
    pages, texts, waiting, cursor = index_rows(path)
    urls = [url for url, _ in pages]
    assert len(urls) == len(set(urls)) == texts  # one row and one text per URL
    assert set(urls) == set(crawled.html), (sorted(set(crawled.html) - set(urls)),
                                            sorted(set(urls) - set(crawled.html)))
    assert dict(pages) == crawled.html  # each under its own title
    assert waiting == set()
    assert cursor == crawled.end


@pytest.mark.timeout(300)
def test_index_holds_every_fetched_html_page_once_and_search_finds_it(
        crawled: Crawled, tmp_path: Path) -> None:
    index, cursor_file = tmp_path / "search.db", tmp_path / "indexer.cursor"
    done = subprocess.run(courtier("index", "--data", str(crawled.data), "--index", str(index),
                                   "--cursor-file", str(cursor_file)),
                          capture_output=True, text=True, timeout=GUARD)
    assert done.returncode == 0, done.stderr
    assert_every_page_once(crawled, index)
    assert f"{len(crawled.html)} pages in the index" in done.stdout
    assert cursor_file.read_text() == f"{crawled.end.token()}\n"  # for archive gc
    # run again: nothing new, nothing twice (and the cursor file written all the same)
    cursor_file.unlink()
    again = subprocess.run(courtier("index", "--data", str(crawled.data), "--index",
                                    str(index), "--cursor-file", str(cursor_file)),
                           capture_output=True, text=True, timeout=GUARD)
    assert again.returncode == 0, again.stderr
    assert "0 events read" in again.stdout
    assert cursor_file.read_text() == f"{crawled.end.token()}\n"
    assert_every_page_once(crawled, index)
    # the about page and its mirror (a revisit record: same bytes) of every host
    found = subprocess.run(courtier("search", "about", "--index", str(index), "--limit", "50"),
                           capture_output=True, text=True, timeout=GUARD)
    assert found.returncode == 0, found.stderr
    hits = [line.split("  ", 1) for line in found.stdout.splitlines()]
    about = {url for url in crawled.html if url.endswith("about.html")}
    assert len(about) >= 4  # each host whose pages were fetched: the page and its mirror
    assert {url for url, _ in hits} == about
    assert all(title == crawled.html[url] for url, title in hits)


def read_cursor(path: Path) -> ShardCursor:
    """The index's cursor as another process sees it (empty while it is being made)."""
    if not path.exists():
        return ShardCursor()
    try:
        db = sqlite3.connect(path, timeout=0.5)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'cursor'").fetchone()
        finally:
            db.close()
    except sqlite3.OperationalError:  # no table yet, or locked for a moment
        return ShardCursor()
    return ShardCursor.from_token(row[0]) if row else ShardCursor()


def kill_after_first_commit(args: list[str], path: Path) -> ShardCursor | None:
    """Start the consumer, SIGKILL it once its index shows a committed batch; the cursor
    at the kill, or None when it finished before the kill could land."""
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + GUARD
        while read_cursor(path) == ShardCursor():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            assert time.monotonic() < deadline, "no batch committed"
            time.sleep(0.005)  # polling interval, not an ordering
        os.kill(proc.pid, signal.SIGKILL)
        code = proc.wait(timeout=GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
    if code == 0:
        return None
    assert code == -signal.SIGKILL
    return read_cursor(path)


@pytest.mark.timeout(300)
def test_a_consumer_killed_mid_run_and_restarted_indexes_every_page_once(
        crawled: Crawled, tmp_path: Path) -> None:
    for attempt in range(5):  # a run that ends before the kill lands is tried again
        index = tmp_path / f"search-{attempt}.db"
        args = courtier("index", "--data", str(crawled.data), "--index", str(index),
                        "--batch", "2")
        cursor = kill_after_first_commit(args, index)
        if cursor is not None and cursor != crawled.end:
            break
    else:
        pytest.fail("the consumer finished before every one of 5 kills")
    # at the kill: exactly the pages of the events up to the cursor, no more, no fewer
    pages, texts, waiting, at_kill = index_rows(index)
    assert at_kill == cursor
    taken = crawled.taken(cursor)
    urls = {url for url, _ in pages}
    assert len(pages) == texts
    assert urls | waiting == taken & set(crawled.html), (
        sorted((taken & set(crawled.html)) - (urls | waiting)), sorted(urls - taken))
    done = subprocess.run(args, capture_output=True, text=True, timeout=GUARD)
    assert done.returncode == 0, done.stderr
    assert_every_page_once(crawled, index)


@pytest.mark.timeout(300)
def test_worker_folders_are_found_and_an_unreadable_archive_stops_without_skipping(
        crawled: Crawled, tmp_path: Path) -> None:
    """The WARC files of a ``crawl --workers N`` crawl lie in DATA/worker-I/warc; an
    --archive that does not hold them stops the run in one line, exit 1, with the events
    before the first page kept; the right archive then finishes the index."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(crawled.data / "courtier.db", data / "courtier.db")
    shutil.copytree(crawled.data / "warc", data / "worker-1" / "warc")
    (data / "worker-0" / "warc").mkdir(parents=True)  # a worker that archived nothing
    wrong = tmp_path / "elsewhere"
    wrong.mkdir()
    index = tmp_path / "search.db"
    failed = subprocess.run(courtier("index", "--data", str(data), "--index", str(index),
                                     "--archive", str(wrong)),
                            capture_output=True, text=True, timeout=GUARD)
    assert failed.returncode == 1
    assert failed.stderr.count("\n") == 1, failed.stderr
    assert failed.stderr.startswith("courtier: failed: record ")
    assert str(wrong) in failed.stderr and "--archive" in failed.stderr
    first_page = next(i for i, (*_, url) in enumerate(crawled.events) if url in crawled.html)
    before = ShardCursor().advanced({shard: pos for _, shard, pos, _ in
                                     crawled.events[:first_page]})
    assert index_rows(index)[3] == before  # the events before it are taken in
    done = subprocess.run(courtier("index", "--data", str(data), "--index", str(index)),
                          capture_output=True, text=True, timeout=GUARD)
    assert done.returncode == 0, done.stderr
    assert_every_page_once(crawled, index)


@pytest.mark.timeout(300)
def test_index_over_a_postgresql_store(tmp_path: Path) -> None:
    """``courtier index --store DSN --data DIR``: the feed from PostgreSQL, the WARC files
    and the index under the folder."""
    from tests.pg import temporary_database

    with temporary_database("consumer") as dsn:
        crawled = asyncio.run(_crawl(tmp_path / "data", n_hosts=2, pages=4, store=dsn))
        assert crawled.html
        done = subprocess.run(courtier("index", "--store", dsn, "--data", str(crawled.data)),
                              capture_output=True, text=True, timeout=GUARD)
    assert done.returncode == 0, done.stderr
    assert not (crawled.data / "courtier.db").exists()  # nothing read from an SQLite store
    assert_every_page_once(crawled, crawled.data / "search.db")


@pytest.mark.timeout(300)
def test_follow_keeps_running_until_sigterm_then_ends_between_batches(
        crawled: Crawled, tmp_path: Path) -> None:
    """``--follow`` catches up (its --cursor-file written batch by batch), keeps waiting for
    events, and a SIGTERM ends it cleanly: exit 0, its summary printed, the index whole."""
    index, cursor_file = tmp_path / "search.db", tmp_path / "indexer.cursor"
    proc = subprocess.Popen(courtier("index", "--data", str(crawled.data), "--index",
                                     str(index), "--follow", "--batch", "50",
                                     "--cursor-file", str(cursor_file)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def cursor_saved() -> ShardCursor:  # the file a follower keeps for archive gc
        text = cursor_file.read_text() if cursor_file.exists() else ""
        return ShardCursor.from_token(text) if text.strip() else ShardCursor()

    try:
        deadline = time.monotonic() + GUARD
        while cursor_saved() != crawled.end:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the follower did not catch up"
            time.sleep(0.01)
        assert proc.poll() is None  # caught up, still following
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("courtier: index: 50 events read: ")
    assert lines[-2].startswith(f"courtier: index {index}: {len(crawled.events)} events read")
    assert lines[-1] == f"search it: courtier search WORDS --index {index}"
    assert_every_page_once(crawled, index)


@dataclass
class Api:
    """A crawl's admin API on a loopback port, with a token, over its SQLite store."""

    store: Any
    port: int
    token_file: Path

    async def index(self, *args: str) -> tuple[int | None, str, str]:
        """``courtier index --api`` with the token and ``args``: (exit, stdout, stderr)."""
        proc = await asyncio.create_subprocess_exec(
            *courtier("index", "--api", f"127.0.0.1:{self.port}", "--api-token-file",
                      str(self.token_file), *args),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), GUARD)
        return proc.returncode, out.decode(), err.decode()


@contextlib.asynccontextmanager
async def api_over(data: Path, tmp_path: Path) -> AsyncIterator[Api]:
    from aiohttp import web

    from courtier.api.control import StoreOnlyControl
    from courtier.api.server import make_app
    from courtier.store.sqlite import SqliteStore

    store = SqliteStore(data / "courtier.db")
    await store.open()
    runner = web.AppRunner(make_app(StoreOnlyControl(store), None, token="s3cret"))
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        token = tmp_path / "token"
        token.write_text("s3cret\n")
        yield Api(store, port, token)
    finally:
        await runner.cleanup()
        await store.close()


@pytest.mark.timeout(300)
async def test_index_over_the_admin_api(crawled: Crawled, tmp_path: Path) -> None:
    """``courtier index --api HOST:PORT --archive ROOT --index FILE``: the feed from a
    crawl's admin API (with its token), the pages from the archive named."""
    index = tmp_path / "search.db"
    async with api_over(crawled.data, tmp_path) as api:
        returncode, out, err = await api.index("--archive", str(crawled.data / "warc"),
                                               "--index", str(index))
    assert returncode == 0, err
    assert_every_page_once(crawled, index)
    assert out.splitlines()[-1] == f"search it: courtier search WORDS --index {index}"


async def _registered(data: Path, name: str) -> tuple[int | None, ShardCursor | None]:
    """(crawl-wide position, per-shard cursor) of consumer ``name``."""
    store = await open_store(None, data, must_exist=True)
    try:
        return await store.consumer_position(name), await store.shard_consumer_position(name)
    finally:
        await store.close()


@pytest.mark.timeout(300)
def test_index_advances_its_registered_consumer_cursor(crawled: Crawled, tmp_path: Path) -> None:
    """``--consumer NAME`` registers NAME in the crawl's store and leaves it at the index's
    own cursor: the last event of the feed. Checked by breaking it: without the advance
    (cli/index_commands.py) the registered position stayed 0."""
    index = tmp_path / "search.db"
    done = subprocess.run(courtier("index", "--data", str(crawled.data), "--index", str(index),
                                   "--batch", "7", "--consumer", "indexer"),
                          capture_output=True, text=True, timeout=GUARD)
    assert done.returncode == 0, done.stderr
    assert_every_page_once(crawled, index)
    assert asyncio.run(_registered(crawled.data, "indexer")) == (None, crawled.end)
    refused = subprocess.run(courtier("index", "--api", "127.0.0.1:9", "--index", str(index),
                                      "--archive", str(tmp_path), "--consumer", "indexer"),
                             capture_output=True, text=True, timeout=GUARD)
    assert refused.returncode == 2 and "--consumer: give it without --api" in refused.stderr


async def _old_consumer(data: Path, name: str, position: int) -> None:
    store = await open_store(None, data, must_exist=True)
    try:
        await store.advance_consumer(name, position)
    finally:
        await store.close()


async def _consumers(data: Path) -> tuple[dict[str, int], dict[str, ShardCursor]]:
    store = await open_store(None, data, must_exist=True)
    try:
        return await store.consumers(), await store.shard_consumers()
    finally:
        await store.close()


def old_index_file(path: Path, position: int) -> None:
    """An index file as a courtier before the per-shard feed left it: format 1, its cursor
    the crawl-wide position (event id) ``position``."""
    from courtier.consumer.index_db import FORMAT_CRAWL_WIDE, SearchIndex

    SearchIndex.open(path, create=True).close()
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'format'", (FORMAT_CRAWL_WIDE,))
        db.execute("UPDATE meta SET value = ? WHERE key = 'cursor'", (str(position),))
    db.close()


def index_format(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return str(db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0])
    finally:
        db.close()


def assert_converted_at(crawled: Crawled, path: Path, position: int) -> None:
    """The index converted from event ``position`` holds every page of the events after
    it and none at or before it (SQLite commits in order: the conversion is exact), in
    format 2, at the feed's end."""
    from courtier.consumer.index_db import FORMAT

    pages, _, waiting, cursor = index_rows(path)
    after = {url for event_id, *_, url in crawled.events if event_id > position}
    assert {url for url, _ in pages} | waiting == after & set(crawled.html)
    assert cursor == crawled.end
    assert index_format(path) == FORMAT


@pytest.mark.timeout(300)
def test_an_index_and_a_consumer_from_the_crawl_wide_feed_are_converted(
        crawled: Crawled, tmp_path: Path) -> None:
    """An index file of format 1 (a crawl-wide cursor, event N) and a ``--consumer``
    registered at N: the run converts both (Store.shard_cursor_at, through the API
    operation run in process) and indexes every page of the events after N, none at or
    before it, leaving the consumer per shard at the end and no hold behind. Checked by
    breaking it: with the conversion taking the store's heads (everything read) the
    pages after N were missing; with the hold not forgotten the last assertion failed."""
    data = tmp_path / "data"
    shutil.copytree(crawled.data, data, ignore=shutil.ignore_patterns("search.db*"))
    ids = sorted(e[0] for e in crawled.events)
    middle = ids[len(ids) // 2]
    asyncio.run(_old_consumer(data, "search", middle))
    index = tmp_path / "search.db"
    old_index_file(index, middle)
    done = subprocess.run(courtier("index", "--data", str(data), "--index", str(index),
                                   "--consumer", "search", "--batch", "5"),
                          capture_output=True, text=True, timeout=GUARD)
    assert done.returncode == 0, done.stderr
    assert_converted_at(crawled, index, middle)
    crawl_wide, by_shard = asyncio.run(_consumers(data))
    assert "search" not in crawl_wide and by_shard["search"] == crawled.end
    assert "search~converting" not in by_shard  # the hold is gone


@pytest.mark.timeout(300)
async def test_an_old_index_file_is_converted_over_the_admin_api(
        crawled: Crawled, tmp_path: Path) -> None:
    """``courtier index --api`` with an index file of format 1 (event N): the run asks the
    crawl's API for the cursor of N (``GET /v1/events/cursor``, a real loopback server
    with a token) and converts the file as a run over the store does: format 2, every
    page of the events after N indexed, none skipped. An N the retention already passed
    stops the run with the store's own error, the file left as it was. Seen red on
    main (the file refused over --api: exit 1, "not --api"), and with the command asking
    for the cursor of N + 3 (three events skipped: pages missing)."""
    from courtier.consumer.index_db import FORMAT_CRAWL_WIDE
    from courtier.core.errors import EventsPruned

    data = tmp_path / "data"
    shutil.copytree(crawled.data, data, ignore=shutil.ignore_patterns("search.db*"))
    ids = sorted(e[0] for e in crawled.events)
    middle = ids[len(ids) // 3]
    index, pruned_index = tmp_path / "search.db", tmp_path / "pruned.db"
    old_index_file(index, middle)
    warc = ("--archive", str(data / "warc"), "--batch", "5")
    async with api_over(data, tmp_path) as api:
        returncode, _, err = await api.index(*warc, "--index", str(index))
        assert returncode == 0, err
        assert_converted_at(crawled, index, middle)

        removed = 0
        for _ in range(10):  # the retention passes the first events (every one is old)
            removed += await api.store.prune_events(time.time() + 10**7, 1000)
            if removed:
                break
        through = await api.store.events_pruned_through()
        assert removed and through >= ids[0]
        try:
            await api.store.shard_cursor_at(through - 1)
        except EventsPruned as exc:  # the store's own error, as a run in process gives it
            in_process = str(exc)
        else:
            raise AssertionError("the store converted a pruned id")
        old_index_file(pruned_index, through - 1)
        returncode, _, err = await api.index(*warc, "--index", str(pruned_index))
    assert returncode == 1
    assert err.strip() == f"courtier: failed: {in_process}"
    assert index_format(pruned_index) == FORMAT_CRAWL_WIDE
