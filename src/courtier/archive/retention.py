"""Retention of archived captures: ``courtier archive gc``.

The rule (per crawl, i.e. per ``--data``): keep the last ``keep_last``
captures of each URL and/or the captures of the last ``keep_days`` days; a
capture is *expired* when it falls outside every rule given. A capture is an
outbox fetch event with a WARC location, ``(url_key, version)``.

A record is never deleted while something still points at it:

* the URL row's current WARC location (a 304 keeps pointing at the last full
  response);
* an event not yet consumed (:class:`Consumed`): above the lowest crawl-wide consumer
  cursor (an event id, ``events --cursor-file``, ``--consumed-up-to``), or above a
  per-shard cursor (``index --cursor-file``, a token) in its shard; without a cursor
  every event counts as unconsumed, so nothing an event names is deleted;
* the payload index (the first copy of a digest, which ``revisit`` records
  of other captures refer to).

Records share segment files, and a WARC file is not rewritten: a file is
deleted as a whole once every capture in it is expired and unreferenced.
Files still marked ``.open`` are never touched.

The outbox is read URL by URL (``Store.events_by_url``, 1,000 URLs a call), so
memory holds one page of events and, per WARC file, whether it must stay; not
every event. Captures are known only from the events still kept: once the
outbox's retention has removed events (docs/scale-out.md, "Bounded growth"), the
records of removed events are not seen, so a file is also kept while any URL row
points into it, and a file holding the first copy of a payload is kept (a
revisit among the removed events may refer to it). A file whose every capture's
event was removed is never deleted by gc.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import fsspec

from courtier.archive.cdxj import warc_files
from courtier.core.errors import ArchiveError
from courtier.core.shard_cursor import ShardCursor
from courtier.store.base import Event, Store

__all__ = ["Consumed", "GcReport", "RetentionRule", "collect_garbage"]

DAY = 24 * 3600.0
PAGE = 5000
#: URLs whose events one store call returns (``Store.events_by_url``)
URLS_PER_PAGE = 1000


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


@dataclass(frozen=True, slots=True)
class Consumed:
    """What every consumer named to gc has read: the events at or below ``up_to`` (the
    lowest crawl-wide position; None: no such consumer) that are also, in their shard,
    at or below every per-shard cursor of ``by_shard``."""

    up_to: int | None = None
    by_shard: tuple[ShardCursor, ...] = ()

    @classmethod
    def of(cls, cursors: Sequence[int | ShardCursor]) -> Consumed | None:
        """The consumers' cursors as loaded from their files; None when there is none."""
        if not cursors:
            return None
        positions = [c for c in cursors if isinstance(c, int)]
        return cls(min(positions) if positions else None,
                   tuple(c for c in cursors if isinstance(c, ShardCursor)))

    def read(self, position: int, shard: int, shard_pos: int) -> bool:
        """True when every consumer has read the event at crawl-wide ``position``,
        ``(shard, shard_pos)``."""
        if self.up_to is not None and position > self.up_to:
            return False
        return all(shard_pos <= cursor.position(shard) for cursor in self.by_shard)


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
                          consumed: Consumed | None, dry_run: bool = False,
                          more_roots: Sequence[str] = ()) -> GcReport:
    """Apply ``rule`` to the archive below ``root`` and ``more_roots`` (the other WARC
    folders of a crawl of several workers; deleted files are then named with their
    root) (see the module docstring)."""
    report = GcReport(dry_run=dry_run)
    verdict = _Verdict()
    after: bytes | None = None
    while events := await store.events_by_url(after, URLS_PER_PAGE):
        page: list[tuple[bytes, list[_Capture]]] = []
        for e in events:
            capture = _Capture.of(e)
            if capture is None:
                continue
            if page and page[-1][0] == e.url_key:
                page[-1][1].append(capture)
            else:
                page.append((e.url_key, [capture]))
        candidates: list[_Capture] = []
        for url_key, items in page:
            row = await store.get_url(url_key)
            live = (row.get("warc_file"), row.get("warc_offset")) if row else (None, None)
            items.sort(key=lambda c: -c.version)
            for rank, capture in enumerate(items):
                if not rule.expired(rank, capture.fetched_at, now):
                    verdict.keep_capture(capture)
                    continue
                report.captures_expired += 1
                if capture.where == live:
                    report.kept_live += 1
                    verdict.keep_capture(capture)
                elif consumed is None or not consumed.read(capture.position, capture.shard,
                                                           capture.shard_pos):
                    report.kept_unconsumed += 1
                    verdict.keep_capture(capture)
                else:
                    candidates.append(capture)
        await verdict.add_candidates(store, candidates)
        after = events[-1].url_key
    pruned = await store.events_pruned_through() > 0
    report.kept_payload = await verdict.settle(store, keep_first_copies=pruned)
    in_use = await store.warc_files_in_use(verdict.doomed - verdict.keep)
    report.kept_live += len(in_use)
    verdict.keep |= in_use
    for each in (root, *more_roots):
        complete, _ = warc_files(each)
        report.files_seen += len(complete)
        try:
            fs, path = fsspec.core.url_to_fs(each)
            for name in complete:
                if name in verdict.doomed and name not in verdict.keep:
                    if not dry_run:
                        fs.rm(f"{str(path).rstrip('/')}/{name}")
                    report.files_deleted.append(f"{each.rstrip('/')}/{name}" if more_roots
                                                else name)
        except OSError as exc:
            raise ArchiveError(f"archive gc below {each!r}: {exc}") from exc
    return report


@dataclass(frozen=True, slots=True)
class _Capture:
    """A fetch event with a WARC record: what the rule and the references need of it."""

    version: int
    fetched_at: float
    file: str
    offset: int
    position: int
    digest: str | None
    revisit: bool
    shard: int
    shard_pos: int

    @property
    def where(self) -> tuple[str, int]:
        return self.file, self.offset

    @classmethod
    def of(cls, event: Event) -> _Capture | None:
        warc: Any = event.payload.get("warc")
        if event.payload.get("kind", "fetch") != "fetch" or not warc:
            return None
        digest = event.payload.get("payload_digest")
        return cls(event.version, float(event.payload["fetched_at"]), str(warc["file"]),
                   int(warc["offset"]), event.id, str(digest) if digest else None,
                   bool(warc.get("revisit")), event.shard, event.shard_pos)


@dataclass(slots=True)
class _Verdict:
    """What the walk over the outbox decided, per WARC file: memory grows with the files
    and the digests kept revisits refer to, not with the events.

    ``keep``: files with a capture that must stay; ``doomed``: files with an expired,
    unreferenced capture; ``first_copies``: doomed files holding the payload index's first
    copy of a digest (a revisit elsewhere may refer to it); ``referred``: the digests of
    the revisit records that stay."""

    keep: set[str] = field(default_factory=set)
    doomed: set[str] = field(default_factory=set)
    first_copies: set[str] = field(default_factory=set)
    referred: set[str] = field(default_factory=set)

    def keep_capture(self, capture: _Capture) -> None:
        self.keep.add(capture.file)
        if capture.revisit and capture.digest:
            self.referred.add(capture.digest)

    async def add_candidates(self, store: Store, candidates: Sequence[_Capture]) -> None:
        """Doom the files of these captures, noting which hold a first copy (one lookup
        of the payload index per page)."""
        digests = [c.digest for c in candidates if c.digest]
        first = await store.payload_locations(digests) if digests else {}
        for capture in candidates:
            self.doomed.add(capture.file)
            found = first.get(capture.digest) if capture.digest else None
            if found is not None and (found[0], found[1]) == capture.where:
                self.first_copies.add(capture.file)

    async def settle(self, store: Store, keep_first_copies: bool) -> int:
        """Keep the doomed files holding a first copy a staying revisit refers to (every
        first copy once events were pruned: their revisits may be among the removed
        events); returns how many files that kept."""
        held = (self.first_copies - self.keep) if keep_first_copies else set()
        referred = sorted(self.referred)
        for start in range(0, len(referred), PAGE):
            found = await store.payload_locations(referred[start:start + PAGE])
            held |= {loc[0] for loc in found.values()} & (self.first_copies - self.keep)
        self.keep |= held
        return len(held)
