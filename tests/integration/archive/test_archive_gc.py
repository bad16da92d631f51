"""`courtier archive gc`: expired captures go, every referenced record stays."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import time
from pathlib import Path

import pytest

from courtier.archive.warc import WarcWriter
from courtier.cli.admin import run_admin
from courtier.cli.main import build_parser, main
from courtier.core.outcome import Outcome
from courtier.core.shard_cursor import ShardCursor
from courtier.fetch.transport import FetchResponse
from courtier.store.base import FetchCommit, NewUrl
from courtier.store.sqlite import SqliteStore

NOW = time.time()
DAY = 86400.0


def key(url: str) -> bytes:
    return hashlib.blake2b(url.encode(), digest_size=16).digest()


def body_of(url: str, version: int) -> bytes:
    return f"<p>{url} v{version}</p>".encode()


async def build_crawl(data: Path) -> dict[str, tuple[int, str]]:
    """Captures written to their own WARC files and committed; returns
    "<url> v<n>" → (event id, file)."""
    writer = WarcWriter(str(data / "warc"))
    store = SqliteStore(data / "courtier.db")
    await store.open()
    plan = [  # (url, version before the commit, age in days, body version, revisit?)
        ("http://a.test/", 0, 10, 1, False), ("http://b.test/", 0, 10, 1, False),
        ("http://d.test/", 0, 10, 1, False), ("http://a.test/", 1, 1, 2, False),
        ("http://e.test/", 0, 1, 1, True),  # identical payload to d v1: a revisit of it
        ("http://c.test/", 0, 10, 1, False), ("http://c.test/", 1, 0, 2, False),
        ("http://d.test/", 1, 0, 2, False),
        ("http://f.test/", 0, 10, 1, False), ("http://f.test/", 1, 0, 1, None),  # None: 304
    ]
    urls = sorted({p[0] for p in plan})
    await store.add_urls([NewUrl(key(u), u, u.split("/")[2], 1, 0, 0, 0.0, 0.0) for u in urls])
    out: dict[str, tuple[int, str]] = {}
    try:
        for url, version, age, body_version, revisit in plan:
            await store.load_due([1], NOW + 10 * DAY, 100, 100)
            body = body_of("http://d.test/", 1) if revisit else body_of(url, body_version)
            resp = FetchResponse(url=url, status=200, reason="OK", http_version="1.1",
                                 headers=[("Content-Type", "text/html")], raw_body=body,
                                 body=body)
            fetched_at = NOW - age * DAY
            if revisit is None:
                record = writer.write_revisit(
                    resp, url, fetched_at, None,
                    "http://netpreserve.org/warc/1.1/revisit/server-not-modified")
            elif revisit:
                record = writer.write_revisit(
                    resp, "http://d.test/", fetched_at,
                    None, "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest")
            else:
                record = writer.write_exchange(resp, warc_date=fetched_at)
            writer.rotate()
            loc = record.location
            warc = {"file": loc.file, "offset": loc.offset, "length": loc.length,
                    "revisit": revisit is not False}
            full = revisit is not None  # a 304 leaves the row on the last full response
            commit = FetchCommit(
                url_key=key(url), url=url, host_key=url.split("/")[2], shard=1,
                version=version, epoch=0,
                outcome=Outcome.OK if full else Outcome.NOT_MODIFIED, fetched_at=fetched_at,
                next_fetch_at=NOW - DAY, status=200 if full else 304,
                warc_file=loc.file if full else None,
                warc_offset=loc.offset if full else None,
                warc_length=loc.length if full else None,
                payload_digest=record.payload_digest if full else None,
                event={"kind": "fetch", "fetched_at": fetched_at, "warc": warc,
                       "payload_digest": record.payload_digest})
            assert (await store.commit([commit])).applied == 1
            last = (await store.read_events(0, 100))[-1]
            out[f"{url} v{version + 1}"] = (last.id, loc.file)
    finally:
        writer.close()
        await store.close()
    return out


def gc(data: Path, *flags: str) -> dict[str, object]:
    buffer = io.StringIO()
    args = build_parser().parse_args(["archive", "gc", "--data", str(data), *flags])
    assert run_admin(args, buffer) == 0
    report: dict[str, object] = json.loads(buffer.getvalue())
    return report


def test_gc_deletes_only_expired_unreferenced_captures(tmp_path: Path) -> None:
    data = tmp_path / "data"
    caps = asyncio.run(build_crawl(data))
    consumed = caps["http://f.test/ v2"][0]
    cursor_c = caps["http://c.test/ v1"][0] - 1  # c v1 is not consumed by this consumer
    warc = data / "warc"
    # without a consumer cursor every event counts as unconsumed: nothing goes
    assert gc(data, "--keep-last", "1")["files_deleted"] == []
    dry = gc(data, "--keep-last", "1", "--consumed-up-to", str(cursor_c), "--dry-run")
    assert dry["files_deleted"] == [caps["http://a.test/ v1"][1]], (dry, caps)
    assert (warc / caps["http://a.test/ v1"][1]).exists()
    cursor = tmp_path / "consumer.cursor"
    cursor.write_text(f"{cursor_c}\n")
    slower = tmp_path / "other.cursor"
    slower.write_text(f"{consumed}\n")
    # a 30-day rule keeps everything of the last 10 days
    assert gc(data, "--keep-days", "30", "--cursor-file", str(cursor))["files_deleted"] == []
    report = gc(data, "--keep-last", "1", "--cursor-file", str(cursor), "--cursor-file",
                str(slower))  # the lowest cursor counts
    assert report["files_deleted"] == [caps["http://a.test/ v1"][1]]
    assert not (warc / caps["http://a.test/ v1"][1]).exists()
    for name in ("http://a.test/ v2",   # newest capture
                 "http://b.test/ v1",   # only capture: the row points at it
                 "http://c.test/ v1",   # expired, but its event is not consumed
                 "http://d.test/ v1",   # expired and consumed, but e's revisit refers to it
                 "http://e.test/ v1",
                 "http://f.test/ v1"):  # expired (a 304 came later), but the row points here
        assert (warc / caps[name][1]).exists(), name
    assert report["kept_payload"] == 1 and report["kept_unconsumed"] == 1
    assert report["kept_live"] == 1
    # the d v1 record stays only while a revisit needs it: drop nothing else by mistake
    assert gc(data, "--keep-last", "1", "--cursor-file", str(cursor))["files_deleted"] == []


def test_gc_needs_a_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "courtier.db").write_bytes(b"")
    assert main(["archive", "gc", "--data", str(tmp_path)]) == 2
    assert "--keep-last" in capsys.readouterr().err


async def _cursor_at(data: Path, position: int) -> ShardCursor:
    store = SqliteStore(data / "courtier.db")
    await store.open()
    try:
        return await store.shard_cursor_at(position)
    finally:
        await store.close()


def test_gc_takes_the_per_shard_cursor_file_of_courtier_index(tmp_path: Path) -> None:
    """``courtier index --cursor-file`` writes a per-shard token: an event above it in its
    shard is unconsumed. Checked by breaking it: with per-shard cursors ignored
    (archive/retention.py, Consumed.read) the empty token let a.test v1's file go."""
    data = tmp_path / "data"
    caps = asyncio.run(build_crawl(data))
    cursor_c = caps["http://c.test/ v1"][0] - 1  # c v1 is not consumed by this consumer
    token = tmp_path / "index.cursor"
    token.write_text(asyncio.run(_cursor_at(data, cursor_c)).token() + "\n")
    dry = gc(data, "--keep-last", "1", "--cursor-file", str(token), "--dry-run")
    assert dry["files_deleted"] == [caps["http://a.test/ v1"][1]], (dry, caps)
    assert dry["kept_unconsumed"] == 1
    token.write_text(ShardCursor().token() + "\n")  # nothing read yet: nothing goes
    assert gc(data, "--keep-last", "1", "--cursor-file", str(token))["files_deleted"] == []
    integer = tmp_path / "events.cursor"  # with an event-id file too: the stricter wins
    integer.write_text(f"{cursor_c}\n")
    token.write_text(asyncio.run(_cursor_at(data, 10**6)).token() + "\n")
    both = gc(data, "--keep-last", "1", "--cursor-file", str(token), "--cursor-file",
              str(integer), "--dry-run")
    assert both["files_deleted"] == [caps["http://a.test/ v1"][1]]
    assert both["kept_unconsumed"] == 1
