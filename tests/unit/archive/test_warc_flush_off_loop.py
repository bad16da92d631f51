"""``WarcWriter.flush_off_loop``: the fsync that makes records durable runs in a thread,
on a descriptor of its own, so the event loop goes on (writes, a rotation, a close) while
the disk syncs; a failed sync abandons the file and names it.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from pathlib import Path

import pytest

from courtier.archive import WarcWriter
from courtier.core.errors import ArchiveError
from tests.unit.archive.test_warc import make_response, read_records, warc_files

real_fsync = os.fsync


def _open_markers(root: Path) -> list[Path]:
    return sorted(root.rglob("*.open"))


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_the_sync_runs_in_a_thread_on_a_descriptor_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loop_thread = threading.get_ident()
    synced: list[tuple[int, int]] = []

    def recording_fsync(descriptor: int) -> None:
        synced.append((threading.get_ident(), descriptor))
        real_fsync(descriptor)

    writer = WarcWriter(str(tmp_path))
    writer.write_exchange(make_response())
    own = writer._file.fileno()  # type: ignore[union-attr]
    monkeypatch.setattr("courtier.archive.warc.os.fsync", recording_fsync)
    before = _open_descriptors()
    await writer.flush_off_loop()
    assert len(synced) == 1
    thread, descriptor = synced[0]
    assert thread != loop_thread, "the fsync ran on the event loop's thread"
    assert descriptor != own
    assert _open_descriptors() == before  # the duplicate was closed
    writer.write_exchange(make_response(url="http://example.com/second"))
    writer.close()
    (path,) = warc_files(tmp_path)
    uris = [h.get("WARC-Target-URI") for h, _, _ in read_records(path)]
    assert uris.count("http://example.com/second") == 2  # request and response


async def test_the_loop_writes_and_closes_the_file_while_the_sync_is_held(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entered, release = threading.Event(), threading.Event()
    loop_thread = threading.get_ident()

    def held_fsync(descriptor: int) -> None:
        assert threading.get_ident() != loop_thread, "the fsync ran on the event loop's thread"
        entered.set()
        assert release.wait(60), "the test never released the sync"
        real_fsync(descriptor)

    writer = WarcWriter(str(tmp_path))
    writer.write_exchange(make_response(url="http://example.com/first"))
    before = _open_descriptors()
    monkeypatch.setattr("courtier.archive.warc.os.fsync", held_fsync)
    flushing = asyncio.create_task(writer.flush_off_loop())
    assert await asyncio.to_thread(entered.wait, 60), "the sync never started"
    # the loop is free: another record, then the file's close (which syncs the original
    # descriptor on the loop, as a close does: let it through)
    monkeypatch.setattr("courtier.archive.warc.os.fsync", real_fsync)
    writer.write_exchange(make_response(url="http://example.com/during"))
    writer.close()
    assert not flushing.done()
    release.set()
    await flushing
    assert _open_descriptors() == before - 1  # the file closed, the duplicate too
    (path,) = warc_files(tmp_path)
    uris = {h.get("WARC-Target-URI") for h, _, _ in read_records(path)}
    assert {"http://example.com/first", "http://example.com/during"} <= uris
    assert _open_markers(tmp_path) == []


async def test_a_failed_sync_abandons_the_file_and_names_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_fsync(descriptor: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    writer = WarcWriter(str(tmp_path))
    writer.write_exchange(make_response())
    name = writer.current_file
    assert name is not None
    monkeypatch.setattr("courtier.archive.warc.os.fsync", failing_fsync)
    with pytest.raises(ArchiveError) as caught:
        await writer.flush_off_loop()
    assert name in str(caught.value) and "Input/output error" in str(caught.value)
    assert writer.current_file is None  # abandoned: its .open marker stays for recovery
    monkeypatch.setattr("courtier.archive.warc.os.fsync", real_fsync)
    writer.write_exchange(make_response())
    assert writer.current_file not in (None, name)
    writer.close()
