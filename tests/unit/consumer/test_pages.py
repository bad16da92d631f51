"""A page's title and text read back from a real WARC file at its event's location
(consumer/pages.py).

Checked by breaking it: with only the first root tried, the worker-folder test fails;
with the stored Content-Type not passed to the parser, the KOI8-R page's title is
mis-decoded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from courtier.archive.warc import WarcWriter
from courtier.consumer.pages import ArchivedPages, archive_roots
from courtier.core.errors import ArchiveError
from courtier.fetch.transport import FetchResponse
from courtier.parse.offload import OffLoopParser


def archive_page(root: Path, url: str, body: bytes, content_type: str) -> dict[str, Any]:
    """Write one exchange under ``root``; the event the crawl would emit for it."""
    root.mkdir(parents=True, exist_ok=True)
    with WarcWriter(str(root)) as writer:
        record = writer.write_exchange(FetchResponse(
            url=url, status=200, reason="OK", http_version="1.1",
            headers=[("Content-Type", content_type)], raw_body=body, body=body,
            started_at=1_700_000_000.0))
    loc = record.location
    return {"id": 3, "url_key": "ab" * 16, "version": 2, "payload": {
        "url": url, "title": "from the event", "payload_digest": record.payload_digest,
        "fetched_at": 1_700_000_000.0,
        "warc": {"file": loc.file, "offset": loc.offset, "length": loc.length,
                 "revisit": False}}}


@pytest.fixture
def parser() -> Any:
    made = OffLoopParser()
    yield made
    made.close()


async def test_title_and_visible_text_from_the_record(tmp_path: Path, parser: Any) -> None:
    body = ("<html><head><title>\u041c\u0435\u043d\u044e  menu</title><style>p{}</style>"
            "</head><body><script>var x = 1;</script><p>Soup of the day</p></body></html>"
            ).encode("koi8-r")
    event = archive_page(tmp_path / "warc", "http://a.test/menu", body,
                         "text/html; charset=koi8-r")
    entry = await ArchivedPages([str(tmp_path / "warc")], parser).entry(event)
    assert entry.title == "\u041c\u0435\u043d\u044e menu"
    assert entry.text == "Soup of the day"
    assert (entry.url, entry.url_key, entry.version) == ("http://a.test/menu", "ab" * 16, 2)
    assert entry.payload_digest == event["payload"]["payload_digest"]


async def test_the_record_is_found_in_a_worker_folder(tmp_path: Path, parser: Any) -> None:
    data = tmp_path / "data"
    (data / "warc").mkdir(parents=True)
    (data / "worker-0" / "warc").mkdir(parents=True)
    event = archive_page(data / "worker-1" / "warc", "http://a.test/", b"<title>Hi</title>",
                         "text/html")
    roots = archive_roots(data)
    assert roots == [str(data / "warc"), str(data / "worker-0" / "warc"),
                     str(data / "worker-1" / "warc")]
    pages = ArchivedPages(roots, parser)
    assert (await pages.entry(event)).title == "Hi"
    assert (await pages.entry(event)).title == "Hi"  # the second time from the known root


async def test_a_record_under_no_root_names_the_roots(tmp_path: Path, parser: Any) -> None:
    event = archive_page(tmp_path / "warc", "http://a.test/", b"<title>Hi</title>",
                         "text/html")
    with pytest.raises(ArchiveError, match=r"elsewhere: no such file \(--archive names"):
        await ArchivedPages([str(tmp_path / "elsewhere")], parser).entry(event)


def test_archive_roots_of_a_folder_without_warc_files(tmp_path: Path) -> None:
    assert archive_roots(tmp_path) == []
