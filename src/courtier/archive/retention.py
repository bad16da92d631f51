"""Retention of archived captures: ``courtier archive gc``.

The rule (per crawl, i.e. per ``--data``): keep the last ``keep_last``
captures of each URL and/or the captures of the last ``keep_days`` days; a
capture is *expired* when it falls outside every rule given. A capture is an
outbox fetch event with a WARC location, ``(url_key, version)``.

A record is never deleted while something still points at it:

* the URL row's current WARC location (a 304 keeps pointing at the last full
  response);
* an event not yet consumed: every event after the lowest consumer cursor
  (``consumed_up_to``); without a cursor every event counts as unconsumed, so
  nothing an event names is deleted;
* the payload index (the first copy of a digest, which ``revisit`` records
  of other captures refer to).

Records share segment files, and a WARC file is not rewritten: a file is
deleted as a whole once every capture in it is expired and unreferenced.
Files still marked ``.open`` are never touched.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import fsspec

from courtier.archive.cdxj import warc_files
from courtier.core.errors import ArchiveError
from courtier.store.base import Store

__all__ = ["GcReport", "RetentionRule", "collect_garbage"]

DAY = 24 * 3600.0
PAGE = 5000


@dataclass(frozen=True, slots=True)
class RetentionRule:
    keep_last: int | None = None   # captures of a URL kept, newest first
    keep_days: float | None = None  # captures younger than this are kept

    def expired(self, rank: int, fetched_at: float, now: float) -> bool:
        """``rank`` 0 is the URL's newest capture."""
        if self.keep_last is None and self.keep_days is None:
            return False
        if self.keep_last is not None and rank < self.keep_last:
            return False
        return not (self.keep_days is not None and now - fetched_at < self.keep_days * DAY)


@dataclass(slots=True)
class GcReport:
    files_seen: int = 0
    files_deleted: list[str] = field(default_factory=list)
    captures_expired: int = 0
    kept_live: int = 0          # expired captures kept: a URL row points at them
    kept_unconsumed: int = 0    # … an unconsumed event names them
    kept_payload: int = 0       # … they are the first copy of a payload digest
    dry_run: bool = False


async def collect_garbage(store: Store, root: str, rule: RetentionRule, now: float,
                          consumed_up_to: int | None, dry_run: bool = False,
                          more_roots: Sequence[str] = ()) -> GcReport:
    """Apply ``rule`` to the archive below ``root`` and ``more_roots`` (the other WARC
    folders of a crawl of several workers; deleted files are then named with their
    root) (see the module docstring)."""
    report = GcReport(dry_run=dry_run)
    captures: dict[bytes, list[tuple[int, float, str, int, int]]] = defaultdict(list)
    digests: dict[tuple[str, int], str] = {}
    revisits: set[tuple[str, int]] = set()
    cursor = 0
    while events := await store.read_events(cursor, PAGE):
        for e in events:
            warc: Any = e.payload.get("warc")
            if e.payload.get("kind", "fetch") == "fetch" and warc:
                where = (str(warc["file"]), int(warc["offset"]))
                captures[e.url_key].append((e.version, float(e.payload["fetched_at"]),
                                            where[0], where[1], e.id))
                if e.payload.get("payload_digest"):
                    digests[where] = str(e.payload["payload_digest"])
                if warc.get("revisit"):
                    revisits.add(where)
        cursor = events[-1].id
    keep: set[str] = set()                           # files with a capture that must stay
    candidates: list[tuple[str, int]] = []           # expired, not pointed at by row/event
    for url_key, items in captures.items():
        row = await store.get_url(url_key)
        live = (row.get("warc_file"), row.get("warc_offset")) if row else (None, None)
        items.sort(key=lambda c: -c[0])
        for rank, (_, fetched_at, file, offset, event_id) in enumerate(items):
            if not rule.expired(rank, fetched_at, now):
                keep.add(file)
                continue
            report.captures_expired += 1
            if (file, offset) == live:
                report.kept_live += 1
                keep.add(file)
            elif consumed_up_to is None or event_id > consumed_up_to:
                report.kept_unconsumed += 1
                keep.add(file)
            else:
                candidates.append((file, offset))
    doomed_at = set(candidates)
    # digests that kept revisit records still refer to (identical-payload revisits)
    referred = {digests[w] for w in revisits if w not in doomed_at and w in digests}
    doomed: set[str] = set()
    for file, offset in candidates:
        digest = digests.get((file, offset))
        if digest in referred and await _first_copy(store, digest, file, offset):
            report.kept_payload += 1
            keep.add(file)
        else:
            doomed.add(file)
    for each in (root, *more_roots):
        complete, _ = warc_files(each)
        report.files_seen += len(complete)
        try:
            fs, path = fsspec.core.url_to_fs(each)
            for name in complete:
                if name in doomed and name not in keep:
                    if not dry_run:
                        fs.rm(f"{str(path).rstrip('/')}/{name}")
                    report.files_deleted.append(f"{each.rstrip('/')}/{name}" if more_roots
                                                else name)
        except OSError as exc:
            raise ArchiveError(f"archive gc below {each!r}: {exc}") from exc
    return report


async def _first_copy(store: Store, digest: str | None, file: str, offset: int) -> bool:
    if digest is None:
        return False
    found = await store.payload_location(digest)
    return found is not None and (found[0], found[1]) == (file, offset)
