"""The local disk without fsspec does what fsspec's LocalFileSystem does, for the calls
the WARC writer and the recovery make; a URL still goes to fsspec; a crawl writing a
local archive never imports fsspec."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from courtier.archive.local_disk import LocalDisk, file_system, is_local


def session(fs: Any, root: Path) -> list[object]:
    """The same calls on ``fs`` under ``root``, and what each one gave or left."""
    base = str(root)
    seen: list[object] = []
    fs.makedirs(f"{base}/a/b", exist_ok=True)
    fs.makedirs(f"{base}/a/b", exist_ok=True)  # again: no error
    fs.touch(f"{base}/a/b/x.warc.gz.open")
    with fs.open(f"{base}/a/b/x.warc.gz", "wb") as out:
        out.write(b"0123456789")
    with fs.open(f"{base}/top.warc.gz", "wb") as out:
        out.write(b"abc")
    seen.append([name[len(base):] for name in sorted(fs.find(base))])
    seen.append((fs.exists(f"{base}/a/b/x.warc.gz"), fs.exists(f"{base}/nothing")))
    seen.append(fs.size(f"{base}/a/b/x.warc.gz"))
    with fs.open(f"{base}/a/b/x.warc.gz", "rb") as back:
        seen.append(back.read())
    fs.touch(f"{base}/top.warc.gz")  # an existing file is emptied
    seen.append(fs.size(f"{base}/top.warc.gz"))
    fs.mv(f"{base}/a/b/x.warc.gz", f"{base}/a/y.warc.gz")
    fs.rm(f"{base}/a/b/x.warc.gz.open")
    seen.append([name[len(base):] for name in sorted(fs.find(base))])
    return seen


def test_the_calls_give_what_fsspec_gives(tmp_path: Path) -> None:
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    assert session(LocalDisk(), mine) == session(LocalFileSystem(), theirs)
    assert session(LocalDisk(), tmp_path / "again")[0] == [
        "/a/b/x.warc.gz", "/a/b/x.warc.gz.open", "/top.warc.gz"]


def test_roots_map_to_the_disk_or_to_fsspec(tmp_path: Path) -> None:
    for root in (str(tmp_path / "w"), f"file://{tmp_path}/w"):
        fs, path = file_system(root)
        assert isinstance(fs, LocalDisk) and is_local(fs) and path == str(tmp_path / "w")
    fs, path = file_system("memory://bucket/warc")
    assert isinstance(fs, fsspec.AbstractFileSystem) and not is_local(fs)
    assert path == "/bucket/warc"
    assert is_local(LocalFileSystem())


def test_a_local_archive_loads_no_fsspec(tmp_path: Path) -> None:
    """Seen red with the WARC writer opening its root through fsspec again."""
    probe = ("import sys; from courtier.archive.warc import WarcWriter; "
             "from courtier.archive.recovery import recover_warc_dir; "
             f"w = WarcWriter({str(tmp_path / 'w')!r}); "
             f"recover_warc_dir({str(tmp_path / 'w')!r}); w.close(); "
             "print('fsspec' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60).stdout.strip()
    assert out == "False"
