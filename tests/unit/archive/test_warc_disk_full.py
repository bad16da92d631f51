"""A full disk: the error names the WARC file that could not be written."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from courtier.archive import WarcWriter
from courtier.core.errors import ArchiveError
from tests.unit.archive.test_warc import make_response


class FullDisk:
    """A file object whose writes (or flushes) fail with ENOSPC once armed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.fail_write = False
        self.fail_flush = False

    def write(self, data: bytes) -> int:
        if self.fail_write:
            raise OSError(errno.ENOSPC, "No space left on device")
        return int(self.inner.write(data))

    def flush(self) -> None:
        if self.fail_flush:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.inner.flush()

    def fileno(self) -> int:
        return int(self.inner.fileno())

    def close(self) -> None:
        self.inner.close()


def _armed_writer(tmp_path: Path) -> tuple[WarcWriter, FullDisk, str]:
    writer = WarcWriter(str(tmp_path))
    writer.write_exchange(make_response())
    name = writer.current_file
    assert name is not None
    disk = FullDisk(writer._file)
    writer._file = disk  # type: ignore[assignment]
    return writer, disk, name


def test_write_error_names_the_file(tmp_path: Path) -> None:
    writer, disk, name = _armed_writer(tmp_path)
    disk.fail_write = True
    with pytest.raises(ArchiveError) as caught:
        writer.write_exchange(make_response())
    assert name in str(caught.value)
    assert "None" not in str(caught.value)
    assert writer.current_file is None  # abandoned; the next write starts a new file


def test_flush_error_names_the_file(tmp_path: Path) -> None:
    writer, disk, name = _armed_writer(tmp_path)
    disk.fail_flush = True
    with pytest.raises(ArchiveError) as caught:
        writer.flush()
    assert name in str(caught.value)
    assert "None" not in str(caught.value)
