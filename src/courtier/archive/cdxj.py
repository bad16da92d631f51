"""CDXJ index of a crawl's WARC files, built with Webrecorder's ``cdxj-indexer``.

``cdxj-indexer`` (the indexer pywb's own tooling uses) already reads
courtier's files correctly: one gzip member per record, ``sha256:`` base32
digests, revisit records. So courtier calls its API instead of writing an
indexer: each line is ``<SURT key> <14-digit timestamp> <JSON>`` with
``url``, ``mime``, ``status``, ``digest``, ``length``, ``offset`` and
``filename``; lines are sorted (what pywb needs for binary search), and
``filename`` is relative to the WARC root, so a per-worker prefix
(``worker-a/…``) is kept. The root is a local folder or an fsspec URL.

Files still marked ``.open`` (being written, or left by a crash and not yet
recovered) are skipped and listed: their tail may be incomplete.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import fsspec
from cdxj_indexer.main import CDXJIndexer

from courtier.archive.warc import OPEN_MARKER_SUFFIX, WARC_SUFFIX
from courtier.core.errors import ArchiveError

__all__ = ["CdxjReport", "warc_files", "write_cdxj"]


@dataclass(slots=True)
class CdxjReport:
    files: int = 0
    lines: int = 0
    skipped_open: list[str] = field(default_factory=list)


def warc_files(root: str) -> tuple[list[str], list[str]]:
    """(complete WARC files, files still marked open), as paths relative to ``root``."""
    try:
        fs, path = fsspec.core.url_to_fs(root)
        base = str(path).rstrip("/")
        if not fs.exists(base):
            return [], []
        found = [str(p) for p in fs.find(base)]
    except (OSError, ValueError) as exc:
        raise ArchiveError(f"cannot list WARC root {root!r}: {exc}") from exc
    names = {p[len(base) + 1:] for p in found if p.startswith(base + "/")}
    warcs = sorted(n for n in names if n.endswith(WARC_SUFFIX))
    marked = {n for n in warcs if n + OPEN_MARKER_SUFFIX in names}
    return [n for n in warcs if n not in marked], sorted(marked)


def _joined(root: str, name: str) -> str:
    return f"{root.rstrip('/')}/{name}"


def write_cdxj(root: str, out: TextIO, more_roots: Sequence[str] = (),
               dir_root: str | None = None) -> CdxjReport:
    """Write the sorted CDXJ index of every complete WARC file below ``root`` (and
    ``more_roots``: the folders of a crawl's several workers) to ``out``; ``filename`` is
    relative to ``dir_root`` (``root`` when not given)."""
    paths: list[str] = []
    report = CdxjReport()
    for each in (root, *more_roots):
        files, marked = warc_files(each)
        paths += [_joined(each, n) for n in files]
        report.skipped_open += [_joined(each, n) if more_roots else n for n in marked]
    report.files = len(paths)
    buffer = io.StringIO()
    indexer: Any = CDXJIndexer(buffer, paths, sort=True,
                               dir_root=(dir_root or root).rstrip("/"))
    try:
        indexer.process_all()
    except Exception as exc:  # the indexer raises whatever its readers raise
        raise ArchiveError(f"CDXJ indexing of {root!r} failed: {exc}") from exc
    text = buffer.getvalue()
    report.lines = text.count("\n")
    out.write(text)
    out.flush()
    return report


def main_stderr_note(report: CdxjReport, stream: TextIO | None = None) -> None:
    """Tell the user (on stderr by default) which files were left out."""
    stream = stream or sys.stderr
    for name in report.skipped_open:
        stream.write(f"courtier: skipped {name}: still marked {OPEN_MARKER_SUFFIX} "
                     "(being written, or not recovered yet)\n")
    if report.skipped_open:
        stream.write(f"courtier: indexed {report.files} WARC files ({report.lines} lines); "
                     f"{len(report.skipped_open)} still open, not indexed: run it again once "
                     "the crawl writing them has stopped\n")
