"""`courtier export cdxj`: an index pywb can use, whose offsets find every record."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from courtier.cli.admin import run_admin
from courtier.cli.main import build_parser, main
from courtier.crawl.app import crawl
from courtier.testweb import TestWebServer, default_web
from tests.integration.crawl.test_crawl_testweb import config_for
from tests.integration.outbox import outbox_events


def cdxj_lines(data: Path) -> list[tuple[str, str, dict[str, str]]]:
    out = io.StringIO()
    assert run_admin(build_parser().parse_args(["export", "cdxj", "--data", str(data)]), out) == 0
    rows = []
    for line in out.getvalue().splitlines():
        key, stamp, blob = line.split(" ", 2)
        rows.append((key, stamp, json.loads(blob)))
    return rows


@pytest.mark.timeout(120)
async def test_cdxj_index_finds_every_record_by_offset_and_length(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with TestWebServer(default_web(n_hosts=2, pages_per_host=5, crawl_delay=0.2)) as server:
        await crawl(config_for(server, data), install_signals=False)  # type: ignore[arg-type]
    rows = cdxj_lines(data)
    assert rows and [(k, t) for k, t, _ in rows] == sorted((k, t) for k, t, _ in rows)
    for key, stamp, entry in rows:
        assert len(stamp) == 14 and stamp.isdigit()
        assert ")/" in key and "://" not in key  # SURT form
        assert {"url", "mime", "status", "digest", "length", "offset", "filename"} <= set(entry)
        with (data / "warc" / entry["filename"]).open("rb") as handle:
            handle.seek(int(entry["offset"]))
            member = handle.read(int(entry["length"]))
        records = list(ArchiveIterator(io.BytesIO(member), check_digests="raise"))
        assert len(records) == 1  # exactly one record at that offset/length
        record = records[0]
        assert record.rec_headers.get_header("WARC-Target-URI") == entry["url"]
        assert record.rec_headers.get_header("WARC-Payload-Digest") == entry["digest"]
    events = await outbox_events(data)
    archived = {(e.payload["warc"]["file"], e.payload["warc"]["offset"])
                for e in events if e.payload["warc"] is not None}
    indexed = {(entry["filename"], int(entry["offset"])) for _, _, entry in rows}
    assert archived == indexed  # every capture the feed names is in the index, and only those
    assert any(entry["mime"] == "warc/revisit" for _, _, entry in rows) or all(
        not e.payload["warc"]["revisit"] for e in events if e.payload["warc"])


def test_cdxj_without_a_crawl_is_a_usage_error(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "cdxj", "--data", str(tmp_path)]) == 2
    assert "no WARC folder" in capsys.readouterr().err


def test_files_still_marked_open_are_skipped_and_named(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    warc = tmp_path / "warc"
    warc.mkdir()
    (warc / "x.warc.gz").write_bytes(b"\x1f\x8bpartial")
    (warc / "x.warc.gz.open").write_bytes(b"")
    assert main(["export", "cdxj", "--data", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "x.warc.gz" in captured.err
    # issue #36: it says so in a line of its own, not only file by file
    assert captured.err.splitlines()[-1] == (
        "courtier: indexed 0 WARC files (0 lines); 1 still open, not indexed: run it again "
        "once the crawl writing them has stopped")


@pytest.mark.timeout(120)
async def test_the_archive_a_crawl_wrote_to_is_the_default_of_export_and_reparse(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #36: after ``crawl --archive DIR``, ``export cdxj --data D`` answered "no WARC
    folder here". The crawl remembers its archive in D; export and reparse find it.
    Red with ``remember_roots`` not called by the crawl."""
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    async with TestWebServer(default_web(n_hosts=2, pages_per_host=3, crawl_delay=0.2)) as server:
        await crawl(config_for(server, data, archive=str(elsewhere)),  # type: ignore[arg-type]
                    install_signals=False)
    assert not (data / "warc").exists() and any(elsewhere.glob("*.warc.gz"))
    rows = cdxj_lines(data)
    assert rows and all((elsewhere / entry["filename"]).is_file() for _, _, entry in rows)
    assert await asyncio.to_thread(main, ["reparse", "--data", str(data)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["captures"] > 0 and report["unreadable"] == 0, report
