"""``courtier reparse``: parse stored captures again, from the WARC archive only.

After a parser fix, the archived HTML is the input: no request goes to the
network (this module holds no transport). For each capture named by a fetch
event of the outbox (an ``ok`` HTML response archived as a ``response``
record), the record is read back by its ``(file, offset, length)``, parsed
with the current rules, fingerprinted (SimHash, near-duplicate grouping over
the captures of this run), and

* its links go through intake (scope, traps) into the store as usual
  (``add_urls``: known URLs are left alone);
* one outbox event of kind ``reparse`` (schema ``event-v1.json``) is appended,
  keyed ``(url_key, version, parser_version)``: running it again, or resuming
  after an interruption, emits no second event for a capture.

Progress is checkpointed (the last outbox id handled, in
``DATA/reparse-v<N>.cursor``) after each batch is durable, so an interrupted
run resumes where it stopped; ``from_start`` ignores the checkpoint (still
without duplicates). URL rows are not changed: the re-parse describes the old
capture, the next fetch describes the page.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from courtier.archive.reader import StoredResponse, read_response
from courtier.archive.roots import ArchiveRoots
from courtier.archive.warc import WarcLocation
from courtier.core.clock import Clock, RealClock
from courtier.core.errors import ArchiveError, InvalidURL
from courtier.core.urls import canonicalize
from courtier.crawl.intake import Intake
from courtier.crawl.process import is_html
from courtier.dedup.pages import DuplicateTracker
from courtier.dedup.simhash_switch import CompiledSwitch
from courtier.events.cursor import load_cursor, save_cursor
from courtier.events.feed import fetch_event, page_fields
from courtier.parse.html import PARSER_VERSION, ParsedPage, parse_html
from courtier.store.base import Event, NewUrl, ReparseEvent, Store

__all__ = ["ReparseReport", "Selection", "default_parse", "reparse"]

#: (body, url, content_type, x_robots_tag) -> page; the seam a parser change goes through
Parse = Callable[[bytes, str, str | None, str | None], ParsedPage]
BATCH = 200


def default_parse(body: bytes, url: str, content_type: str | None,
                  x_robots_tag: str | None) -> ParsedPage:
    return parse_html(body, url, content_type, x_robots_tag, want_text=True)


@dataclass(frozen=True, slots=True)
class Selection:
    """Which captures to re-parse: fetched at or after ``since``, of host ``host``
    (a host name, or host:port to name one port)."""

    since: float | None = None
    host: str | None = None

    def admits(self, payload: dict[str, Any]) -> bool:
        if self.since is not None and float(payload.get("fetched_at") or 0) < self.since:
            return False
        if self.host is None:
            return True
        parts = urlsplit(str(payload.get("url", "")))
        want = self.host.lower()
        return want in (parts.hostname, parts.netloc.lower())


@dataclass(slots=True)
class ReparseReport:
    captures: int = 0       # captures selected and read back
    events: int = 0         # reparse events appended (0 on a repeated run)
    new_urls: int = 0       # discovered URLs the store did not know
    unreadable: int = 0     # records that could not be read (named in the log)
    cursor: int = 0


def _capture(event: Event, selection: Selection) -> WarcLocation | None:
    """The archived response of a fetch event worth re-parsing, or None."""
    p = event.payload
    warc = p.get("warc")
    if (p.get("kind", "fetch") != "fetch" or p.get("outcome") != "ok" or not warc
            or warc.get("revisit") or not is_html(p.get("content_type"))
            or not selection.admits(p)):
        return None
    return WarcLocation(str(warc["file"]), int(warc["offset"]), int(warc["length"]))


class Reparser:
    def __init__(self, store: Store, roots: ArchiveRoots, intake: Intake, parse: Parse,
                 parser_version: int, clock: Clock) -> None:
        self.store, self.roots, self.intake = store, roots, intake
        self.parse, self.parser_version, self.clock = parse, parser_version, clock
        self.duplicates = DuplicateTracker(switch=CompiledSwitch())
        self.unreadable: list[str] = []

    def _one(self, event: Event, location: WarcLocation, depth: int
             ) -> tuple[ReparseEvent, list[NewUrl]] | None:
        try:
            stored: StoredResponse = read_response(self.roots.root_of(location.file),
                                                   location)
        except ArchiveError as exc:
            self.unreadable.append(str(exc))
            return None
        old = event.payload
        content_type = stored.header("content-type")
        x_robots = stored.header("x-robots-tag")
        page = self.parse(stored.body, str(old["url"]), content_type, x_robots)
        fp, twin = self.duplicates.fingerprint(event.url_key, page.text)
        new_urls: list[NewUrl] = []
        if not page.meta_nofollow:
            raws = [link.url for link in page.links if not link.nofollow]
            new_urls = self.intake.links(raws, depth + 1, self.clock.now())
        payload = fetch_event(
            kind="reparse", outcome="ok", status=stored.status,
            fetched_at=float(old["fetched_at"]), url=str(old["url"]),
            content_type=content_type, content_language=stored.header("content-language"),
            content_length=len(stored.body), payload_digest=stored.payload_digest,
            simhash=fp, near_dup_of=twin, redirect_to=None,
            redirect_hops=int(old.get("redirect_hops") or 0), changed=old.get("changed"),
            redirect_chain=old.get("redirect_chain") or [],
            warc=old["warc"], error_kind=None, page=page_fields(page, x_robots))
        payload.update(url_key=event.url_key.hex(), url=old["url"], version=event.version,
                       outcome="ok", parser_version=self.parser_version)
        return ReparseEvent(event.url_key, event.version, self.parser_version, payload), new_urls

    async def batch(self, events: list[Event], selection: Selection,
                    report: ReparseReport) -> None:
        out: list[ReparseEvent] = []
        rows: list[NewUrl] = []
        for event in events:
            location = _capture(event, selection)
            if location is None:
                continue
            row = await self.store.get_url(event.url_key)
            depth = int(row["depth"]) if row is not None else 0
            done = await asyncio.to_thread(self._one, event, location, depth)
            if done is None:
                report.unreadable += 1
                continue
            report.captures += 1
            out.append(done[0])
            rows += done[1]
        if rows:
            report.new_urls += await self.store.add_urls(rows)
            self.intake.remember(r.url_key for r in rows)
        if out:
            report.events += await self.store.add_reparse_events(out)


async def reparse(
    store: Store, warc_root: str, intake: Intake, *, selection: Selection = Selection(),
    checkpoint: Path | None = None, from_start: bool = False, parse: Parse = default_parse,
    parser_version: int = PARSER_VERSION, clock: Clock | None = None,
    should_stop: Callable[[], bool] | None = None, more_roots: Sequence[str] = (),
) -> ReparseReport:
    """Re-parse the selected captures (see the module docstring); returns the figures.
    ``more_roots``: the other WARC folders of a crawl of several workers."""
    reparser = Reparser(store, ArchiveRoots([warc_root, *more_roots]), intake, parse,
                        parser_version, clock or RealClock())
    report = ReparseReport()
    cursor = 0 if from_start else load_cursor(checkpoint, 0, "reparse checkpoint")
    while not (should_stop is not None and should_stop()):
        events = await store.read_events(cursor, BATCH)
        if not events:
            break
        await reparser.batch(events, selection, report)
        cursor = events[-1].id
        if checkpoint is not None:
            save_cursor(checkpoint, cursor)  # only after the batch is durable
    report.cursor = cursor
    return report


def restore_scope_seeds(intake: Intake, seeds: list[str]) -> None:
    """The crawl's seeds define the scope of links found again."""
    for url in seeds:
        with contextlib.suppress(InvalidURL):
            intake.scope.add_seed(canonicalize(url))
