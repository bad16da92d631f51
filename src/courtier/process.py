"""From a finished fetch to a :class:`FetchCommit`: outcome, archive, parse, links.

This is the per-page pipeline between the transport and the store. It is
synchronous CPU work (WARC encoding, HTML parsing) on bytes already in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from courtier.archive.base import ArchiveWriter
from courtier.archive.warc import ArchivedRecord
from courtier.config import CrawlConfig
from courtier.errors import BlockedAddressError, FetchError, InvalidURL
from courtier.fetch.transport import FetchResponse
from courtier.frontier.lease import Lease, LeaseKind
from courtier.intake import Intake
from courtier.outcome import Outcome
from courtier.parse.html import parse_html
from courtier.store.base import DueUrl, FetchCommit, NewUrl
from courtier.urls import canonicalize

HTML_TYPES = ("text/html", "application/xhtml+xml")
RETRY_BASE = 60.0


@dataclass(slots=True)
class PageFigures:
    """Counters the worker reports (progress, summary)."""

    fetched: int = 0
    errors: int = 0
    bytes: int = 0
    denied: int = 0
    links: int = 0


def is_html(content_type: str | None) -> bool:
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() in HTML_TYPES


class PageProcessor:
    def __init__(self, config: CrawlConfig, intake: Intake, archive: ArchiveWriter,
                 agent_token: str) -> None:
        self.config = config
        self.intake = intake
        self.archive = archive
        self.agent = agent_token
        self.figures = PageFigures()

    def _commit(self, lease: Lease, due: DueUrl, outcome: Outcome, now: float,
                next_at: float | None, **fields: Any) -> FetchCommit:
        commit = FetchCommit(
            url_key=due.url_key, url=due.url, host_key=due.host_key, shard=due.shard,
            version=due.version, epoch=lease.epoch, outcome=outcome, fetched_at=now,
            next_fetch_at=next_at, robots_digest=lease.robots_digest,
            delay_applied=lease.delay, **fields,
        )
        commit.event = {
            "url": due.url, "outcome": str(outcome), "status": commit.status,
            "fetched_at": now, "content_type": commit.content_type,
            "payload_digest": commit.payload_digest, "title": commit.title,
            "redirect_to": commit.redirect_to,
            "warc": None if commit.warc_file is None else {
                "file": commit.warc_file, "offset": commit.warc_offset,
                "length": commit.warc_length},
        }
        return commit

    def denied(self, due: DueUrl, reason: str, digest: str | None, epoch: int,
               now: float) -> FetchCommit:
        """A URL not fetched: robots.txt disallows it, a policy blocks its host, or its
        host's robots.txt stayed unreachable (the cycle ends; it returns at recrawl)."""
        self.figures.denied += 1
        outcome = {"robots": Outcome.ROBOTS_DENIED, "blocked": Outcome.BLOCKED}.get(
            reason, Outcome.ERROR)
        lease = Lease(kind=LeaseKind.PAGE, host_key=due.host_key, url=due.url, issued_at=now,
                      epoch=epoch, delay=0.0, due=due, robots_digest=digest)
        error_kind = None if outcome is not Outcome.ERROR else reason
        return self._commit(lease, due, outcome, now, now + self.config.recrawl_interval,
                            error_kind=error_kind)

    def failed(self, lease: Lease, exc: FetchError, now: float) -> FetchCommit:
        """No usable response: retry with capped back-off, or give up after max_retries."""
        assert lease.due is not None
        self.figures.errors += 1
        if isinstance(exc, BlockedAddressError):
            return self._commit(lease, lease.due, Outcome.BLOCKED, now,
                                now + self.config.recrawl_interval, error_kind=exc.kind)
        return self._retry(lease, lease.due, now, None, error_kind=exc.kind)

    def _retry(self, lease: Lease, due: DueUrl, now: float, status: int | None,
               **fields: Any) -> FetchCommit:
        failures = due.failure_count + 1
        if failures > self.config.max_retries:
            return self._commit(lease, due, Outcome.ERROR, now,
                                now + self.config.recrawl_interval, status=status,
                                failure_count=0, **fields)
        backoff = min(self.config.recrawl_interval, RETRY_BASE * 2 ** (failures - 1))
        return self._commit(lease, due, Outcome.RETRY, now, now + backoff, status=status,
                            failure_count=failures, **fields)

    def fetched(self, lease: Lease, resp: FetchResponse, now: float) -> FetchCommit:
        """An HTTP response: archive it, classify it, extract links from HTML."""
        due = lease.due
        assert due is not None
        figures = self.figures
        figures.fetched += 1
        figures.bytes += len(resp.raw_body)
        status = resp.status
        content_type = resp.header("content-type")
        record: ArchivedRecord | None = None
        if status != 304:
            record = self.archive.write_exchange(resp, warc_date=now)
        fields: dict[str, Any] = {
            "status": status, "content_type": content_type,
            "content_length": len(resp.body),
        }
        if record is not None:
            loc = record.location
            fields.update(warc_file=loc.file, warc_offset=loc.offset, warc_length=loc.length,
                          payload_digest=record.payload_digest)
        if 200 <= status < 300:
            fields.update(etag=resp.header("etag"), last_modified=resp.header("last-modified"))
            new_urls: list[NewUrl] = []
            if is_html(content_type) and resp.truncated is None:
                page = parse_html(resp.body, due.url, content_type, resp.header("x-robots-tag"),
                                  agent_token=self.agent, want_text=False)
                fields["title"] = page.title
                if not page.meta_nofollow:
                    raws = [link.url for link in page.links if not link.nofollow]
                    new_urls = self.intake.links(raws, due.depth + 1, now)
                    figures.links += len(new_urls)
            return self._commit(lease, due, Outcome.OK, now, now + self.config.recrawl_interval,
                                new_urls=new_urls, **fields)
        if status == 304:
            return self._commit(lease, due, Outcome.NOT_MODIFIED, now,
                                now + self.config.recrawl_interval, **fields)
        if 300 <= status < 400:
            return self._redirect(lease, due, resp, now, fields)
        if status in (404, 410):
            return self._commit(lease, due, Outcome.GONE, now,
                                now + self.config.recrawl_interval, **fields)
        if status == 429 or status >= 500:
            figures.errors += 1
            return self._retry(lease, due, now, **fields)
        return self._commit(lease, due, Outcome.HTTP_ERROR, now,
                            now + self.config.recrawl_interval, **fields)

    def _redirect(self, lease: Lease, due: DueUrl, resp: FetchResponse, now: float,
                  fields: dict[str, Any]) -> FetchCommit:
        location = resp.header("location")
        new_urls: list[NewUrl] = []
        if location:
            try:
                target = canonicalize(location, base=due.url)
            except InvalidURL:
                target = None
            if target is not None:
                fields["redirect_to"] = target.url
                hops = due.redirect_hops + 1
                if hops <= self.config.max_redirect_hops:
                    new = self.intake.make(target, due.depth, now, redirect_hops=hops)
                    if new is not None:
                        new_urls.append(new)
        return self._commit(lease, due, Outcome.REDIRECT, now,
                            now + self.config.recrawl_interval, new_urls=new_urls, **fields)
