"""The file system of a WARC root: the local disk without fsspec, or fsspec's for a URL.

A crawl writing its WARC files to a local folder (the default, ``DATA/warc``) needs none
of fsspec, whose import costs ~20 ms of CPU before a crawl's first request
(bench/README.md, "Start-up"). :func:`file_system` gives ``(fs, path)`` for a root:
:class:`LocalDisk` and an absolute path for a local path or a ``file://`` URL, fsspec's
own file system (imported then) for any other URL (``s3://…``, ``memory://…``).
:class:`LocalDisk` has the few methods of fsspec's ``AbstractFileSystem`` that the WARC
writer and the recovery call, with the meaning fsspec's ``LocalFileSystem`` gives them
(tests/unit/archive/test_local_disk.py runs both side by side); :func:`is_local` is true
for either.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any


class LocalDisk:
    """fsspec's local calls used for WARC files, on the local disk directly."""

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        os.makedirs(path, exist_ok=exist_ok)

    def touch(self, path: str) -> None:
        """An empty file at ``path`` (an existing one is emptied, as fsspec does)."""
        with open(path, "wb"):
            pass

    def rm(self, path: str) -> None:
        os.remove(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def find(self, path: str) -> list[str]:
        """Every file below ``path`` (recursively, directories not listed), sorted."""
        return sorted(os.path.join(folder, name)
                      for folder, _, names in os.walk(path, followlinks=True)
                      for name in names)

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def open(self, path: str, mode: str = "rb") -> IO[Any]:
        return open(path, mode)

    def mv(self, source: str, target: str) -> None:
        os.replace(source, target)


def is_local_root(root: str) -> bool:
    """A local path or a ``file://`` URL (not a remote fsspec URL)."""
    return "://" not in root or root.startswith("file://")


def file_system(root: str) -> tuple[Any, str]:
    """``(fs, path)`` of ``root``: see the module docstring."""
    if is_local_root(root):
        return LocalDisk(), os.path.abspath(root.removeprefix("file://"))
    import fsspec

    fs, path = fsspec.core.url_to_fs(root)
    return fs, path


def is_local(fs: Any) -> bool:
    """Whether ``fs`` is the local disk (:class:`LocalDisk`, or fsspec's local one)."""
    if isinstance(fs, LocalDisk):
        return True
    local = sys.modules.get("fsspec.implementations.local")  # fsspec never loaded: not it
    return local is not None and isinstance(fs, local.LocalFileSystem)
