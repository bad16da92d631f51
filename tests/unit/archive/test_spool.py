"""The spooled archive without a network: local fsspec target, segment bookkeeping."""

from __future__ import annotations

from pathlib import Path

import pytest

from courtier.archive.spool import SpooledArchive, is_remote, storage_options
from courtier.core.clock import VirtualClock
from courtier.core.errors import ConfigError
from courtier.crawl.metrics import CrawlMetrics
from courtier.fetch.transport import FetchResponse
from courtier.store.memory import MemoryStore


def response(n: int) -> FetchResponse:
    body = f"<p>page {n}</p>".encode() * 50
    return FetchResponse(url=f"http://a.test/{n}", status=200, reason="OK", http_version="1.1",
                         headers=[("Content-Type", "text/html")], raw_body=body, body=body)


async def test_segments_rotate_by_size_and_age_and_are_verified_after_upload(
        tmp_path: Path) -> None:
    clock, store = VirtualClock(1000.0), MemoryStore()
    remote = tmp_path / "remote"
    archive = SpooledArchive(f"file://{remote}", tmp_path / "spool", "w1", store,
                             max_bytes=3000, max_age=60.0, clock=clock)
    locations = [archive.write_exchange(response(n)).location for n in range(6)]
    archive.flush()
    await archive.settle()
    assert len({loc.file for loc in locations}) > 1  # rotated by size
    recorded = {s.name for s in await store.segments("w1")}
    assert {loc.file for loc in locations} <= recorded  # known before rows point at them
    archive.write_exchange(response(7))
    clock.advance(61.0)
    await archive.settle()  # the open segment is old: closed and uploaded
    await archive.drain()
    assert archive.backlog == 0
    assert {s.state for s in await store.segments("w1")} == {"verified"}
    for loc in locations:
        with (remote / loc.file).open("rb") as handle:
            handle.seek(loc.offset)
            assert handle.read(2) == b"\x1f\x8b"  # a gzip member starts at the offset
    assert not list((tmp_path / "spool").rglob("*.warc.gz"))


def test_prefix_and_remote_detection() -> None:
    assert is_remote("s3://b/p") and not is_remote("/data/warc") and not is_remote("file:///x")
    assert storage_options("s3://b", "http://127.0.0.1:9", "eu-1") == {
        "endpoint_url": "http://127.0.0.1:9", "client_kwargs": {"region_name": "eu-1"}}
    assert storage_options("gs://b") == {}
    with pytest.raises(ConfigError, match="--archive-prefix"):
        SpooledArchive("memory://x", Path("/nonexistent"), "a/b", MemoryStore())


def test_the_upload_backlog_gauge_has_its_published_name() -> None:
    text = CrawlMetrics().render().decode()
    assert "courtier_warc_upload_backlog_segments" in text
