"""A crawl archived to a real S3-compatible server on loopback (moto's standalone
server): every record readable back by its stored offset, kill -9 between spool and
upload loses nothing, and a lost spool's URLs are fetched again."""

from __future__ import annotations

import asyncio
import io
import shutil
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from courtier.crawl.app import crawl
from courtier.store.sqlite import SqliteStore
from courtier.testweb import TestWebServer, default_web
from courtier.testweb.killloop import run_crawler
from tests.integration.archive.s3server import s3_server
from tests.integration.crawl.test_crawl_testweb import config_for

ARCHIVE = "s3://crawl/archive"


async def stored_state(data: Path) -> tuple[list[dict[str, Any]], list[Any], list[Any]]:
    store = SqliteStore(data / "courtier.db")
    await store.open()
    try:
        events = await store.read_events(0, 100_000)
        rows = [await store.get_url(e.url_key) for e in events]
        segments = await store.segments()
    finally:
        await store.close()
    return [r for r in rows if r is not None], events, segments


def remote_fs() -> Any:
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    return s3fs.S3FileSystem()


def read_remote(fs: Any, name: str, offset: int, length: int) -> Any:
    with fs.open(f"crawl/archive/{name}", "rb") as handle:
        handle.seek(offset)
        member = handle.read(length)
    records = list(ArchiveIterator(io.BytesIO(member), check_digests="raise"))
    assert len(records) == 1
    return records[0]


def assert_every_row_readable(rows: list[dict[str, Any]]) -> int:
    checked, fs = 0, remote_fs()
    for row in {r["url"]: r for r in rows}.values():
        if row["warc_file"] is None:
            continue
        record = read_remote(fs, row["warc_file"], row["warc_offset"], row["warc_length"])
        assert record.rec_headers.get_header("WARC-Target-URI") == row["url"]
        if record.rec_type == "response":
            assert record.rec_headers.get_header("WARC-Payload-Digest") == row["payload_digest"]
        checked += 1
    return checked


@pytest.mark.timeout(180)
async def test_crawl_to_s3_every_record_readable_by_its_offset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with s3_server(monkeypatch):
        data = tmp_path / "data"
        async with TestWebServer(default_web(n_hosts=2, pages_per_host=5,
                                             crawl_delay=0.2)) as server:
            config = config_for(server, data, archive=ARCHIVE, archive_prefix="w1",
                                archive_segment_bytes=20_000)
            await crawl(config, install_signals=False)  # type: ignore[arg-type]
        rows, events, segments = await stored_state(data)
        assert await asyncio.to_thread(assert_every_row_readable, rows) > 10
        assert len(segments) > 1 and {s.state for s in segments} == {"verified"}
        assert all(s.name.startswith("w1/") for s in segments)
        assert not list((data / "spool").rglob("*.warc.gz"))  # uploaded, then removed
        from courtier.archive.cdxj import write_cdxj

        out = io.StringIO()
        report = await asyncio.to_thread(write_cdxj, ARCHIVE, out)
        assert report.files == len(segments) and report.lines > 10
        assert all('"filename": "w1/' in line for line in out.getvalue().splitlines())
        for event in events:
            if event.payload["warc"] is not None:
                assert event.payload["warc"]["file"].startswith("w1/")


@pytest.mark.timeout(240)
async def test_kill_9_between_spool_and_upload_then_resume_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with s3_server(monkeypatch):
        data = tmp_path / "data"
        async with TestWebServer(default_web(n_hosts=2, pages_per_host=8,
                                             crawl_delay=0.2)) as server:
            hosts = tmp_path / "hosts.txt"
            hosts.write_text(server.web.hosts_file_text())
            args = ["crawl", *server.web.seeds(), "--data", str(data), "--resolve", str(hosts),
                    "--allow-network", "127.0.0.0/8", "--delay", "0.2", "--progress", "none",
                    "--linger", "0", "--archive", ARCHIVE, "--archive-prefix", "w1",
                    "--archive-segment-age", "3600"]  # nothing uploads before the kill
            status = await run_crawler(args, server, kill_after=12, limit=60)
            assert status == -9
            spooled = list((data / "spool" / "w1").glob("*.warc.gz"))
            assert spooled  # records were spooled and not uploaded
            rows, _, segments = await stored_state(data)
            assert {s.state for s in segments} == {"spooled"}
            assert any(r["warc_file"] for r in rows)  # committed rows point into the spool
            status = await run_crawler(args, server, kill_after=None, limit=120)
            assert status == 0
            expected = server.web.expected_fetches()
        rows, events, segments = await stored_state(data)
        assert {s.state for s in segments} == {"verified"}
        assert await asyncio.to_thread(assert_every_row_readable, rows) > 10
        fetched = {e.payload["url"] for e in events if e.payload["status"] is not None}
        assert expected <= fetched | {e.payload["url"] for e in events}


@pytest.mark.timeout(240)
async def test_a_lost_spool_is_found_and_its_urls_fetched_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with s3_server(monkeypatch):
        data = tmp_path / "data"
        async with TestWebServer(default_web(n_hosts=2, pages_per_host=8,
                                             crawl_delay=0.2)) as server:
            hosts = tmp_path / "hosts.txt"
            hosts.write_text(server.web.hosts_file_text())
            args = ["crawl", *server.web.seeds(), "--data", str(data), "--resolve", str(hosts),
                    "--allow-network", "127.0.0.0/8", "--delay", "0.2", "--progress", "none",
                    "--linger", "0", "--archive", ARCHIVE, "--archive-prefix", "w1",
                    "--archive-segment-age", "3600"]
            assert await run_crawler(args, server, kill_after=12, limit=60) == -9
            rows, _, _ = await stored_state(data)
            lost = {r["url"] for r in rows if r["warc_file"]}
            assert lost
            shutil.rmtree(data / "spool")  # the disk with the spool is gone
            log_before = len(server.log)
            assert await run_crawler(args, server, kill_after=None, limit=120) == 0
            refetched = {server.url(r.host, r.path_qs) for r in server.log[log_before:]}
        rows, _, segments = await stored_state(data)
        assert "lost" in {s.state for s in segments}
        assert lost <= refetched  # every URL whose record was lost was fetched again
        assert await asyncio.to_thread(assert_every_row_readable, rows) >= len(lost)
