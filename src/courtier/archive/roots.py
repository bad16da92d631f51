"""Where a crawl wrote its WARC files, remembered in its data folder.

A crawl adds to ``DATA/archive-roots.json`` when it starts: its ``--archive`` (a folder
or an fsspec URL such as ``s3://bucket/prefix``) or ``DATA/warc``; ``crawl --workers N``
adds, in its own ``--data``, every worker's folder (``DATA/worker-I/warc``). The roots of
earlier runs stay listed. ``export
cdxj``, ``reparse`` and ``archive gc`` read it when no ``--archive`` is given, so they find
the archive the crawl used without being told again.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path

ROOTS_FILE = "archive-roots.json"


def remember_roots(data: Path, roots: list[str]) -> None:
    """Add ``roots`` to where the crawl in ``data`` wrote its WARC files (the roots of
    earlier runs stay: their captures are still in the store). Written atomically; a data
    folder that cannot be written keeps the old record."""
    path = data / ROOTS_FILE
    known = archive_roots(data) if path.exists() else []
    merged = known + [root for root in roots if root not in known]
    if merged == known:
        return
    temporary = path.with_suffix(".tmp")
    with contextlib.suppress(OSError):
        temporary.write_text(json.dumps({"roots": merged}) + "\n", encoding="utf-8")
        temporary.replace(path)


def archive_roots(data: Path) -> list[str]:
    """The remembered roots of the crawl in ``data``, else ``[DATA/warc]`` (a crawl from
    before they were remembered, or none yet)."""
    try:
        roots = json.loads((data / ROOTS_FILE).read_text(encoding="utf-8"))["roots"]
    except (OSError, ValueError, KeyError, TypeError):
        return [str(data / "warc")]
    if not isinstance(roots, list) or not roots or \
            not all(isinstance(root, str) for root in roots):
        return [str(data / "warc")]
    return roots


class ArchiveRoots:
    """The roots of one crawl's WARC files (one folder per worker of ``crawl --workers
    N``): which root holds a file. A stored location names its file relative to the root
    its worker wrote to; file names are unique (time and a random part), so the name
    finds the root. Listed on first use, and again when a name is not found (a file
    rotated in since); a name found nowhere is looked for in the first root."""

    def __init__(self, roots: Sequence[str]) -> None:
        self.roots = list(roots)
        self._where: dict[str, str] | None = None
        self._missing: set[str] = set()

    def root_of(self, name: str) -> str:
        if len(self.roots) == 1:
            return self.roots[0]
        if self._where is None or (name not in self._where and name not in self._missing):
            self._where = self._listed()
            if name not in self._where:
                self._missing.add(name)
        return self._where.get(name, self.roots[0])

    def _listed(self) -> dict[str, str]:
        from courtier.archive.cdxj import warc_files

        where: dict[str, str] = {}
        for root in self.roots:
            complete, marked = warc_files(root)
            for name in (*complete, *marked):
                where.setdefault(name, root)
        return where
