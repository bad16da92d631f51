"""From a finished fetch to a :class:`FetchCommit`: outcome, archive, parse, links.

This is the per-page pipeline between the transport and the store. It is
synchronous CPU work (WARC encoding, HTML parsing, SimHash) on bytes already
in memory. The next fetch time of every outcome comes from the recrawl policy
(``frontier/recrawl.py``); the page's change history travels in its row.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from typing import Any, Literal

from courtier.archive.base import ArchiveWriter
from courtier.archive.warc import REVISIT_IDENTICAL_DIGEST, REVISIT_NOT_MODIFIED, ArchivedRecord
from courtier.core.config import CrawlConfig
from courtier.core.errors import BlockedAddressError, FetchError, InvalidURL
from courtier.core.logs import log_event
from courtier.core.outcome import Outcome
from courtier.core.urls import canonicalize
from courtier.crawl.https_upgrade import UPGRADE_HOP_STATUS, UPGRADE_KIND, https_twin
from courtier.crawl.intake import SEED_PRIORITY, Intake
from courtier.dedup.fingerprint64 import hamming
from courtier.dedup.pages import DuplicateTracker, FirstCopy
from courtier.dedup.simhash_switch import CompiledSwitch
from courtier.events.feed import fetch_event, page_fields
from courtier.events.redirects import chain_hops, extend_chain
from courtier.fetch.transport import FetchResponse
from courtier.frontier.lease import Lease, LeaseKind
from courtier.frontier.planner import BudgetController
from courtier.frontier.recrawl import ChangeStats, RecrawlPolicy
from courtier.frontier.refresh import RefreshPlanner
from courtier.frontier.scheduler import path_of
from courtier.frontier.templates import url_template
from courtier.parse.caps import MAX_HEADER_CHARS, MAX_VALIDATOR_CHARS, cap_text, whole_or_none
from courtier.parse.html import ParsedPage, parse_page_words
from courtier.parse.sitemaps import SitemapEntry, SitemapResult, parse_sitemap
from courtier.store.base import DueUrl, FetchCommit, NewUrl

log = logging.getLogger("courtier.crawl.process")
#: ``event`` of a URL's cycle in the JSON log: a fetch, or a URL refused before one
_OUTCOME_EVENTS = {Outcome.ROBOTS_DENIED: "robots_denied", Outcome.BLOCKED: "blocked"}

HTML_TYPES = ("text/html", "application/xhtml+xml")
#: truncation reasons worth another fetch (a slow or broken transfer); a body cut by a
#: size cap ("length", "decoded") or an unreadable Content-Encoding would end the same
TRANSIENT_CUTS = frozenset({"time", "slow", "disconnect"})
SITEMAP_PRIORITY = 1


@dataclass(slots=True)
class PageFigures:
    """Counters the worker reports (progress, summary)."""

    fetched: int = 0
    errors: int = 0
    bytes: int = 0
    denied: int = 0
    links: int = 0
    revisits: int = 0
    near_duplicates: int = 0
    sitemap_urls: int = 0


def is_html(content_type: str | None) -> bool:
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() in HTML_TYPES


def looks_like_sitemap(url: str, content_type: str | None, body: bytes) -> bool:
    """An XML sitemap or index (or a gzipped one named like a sitemap)."""
    if body[:2] == b"\x1f\x8b":
        return "sitemap" in url.lower()
    head = body[:2048].lstrip()
    if is_html(content_type) or not head.startswith(b"<"):
        return False
    return b"<urlset" in head or b"<sitemapindex" in head


def sitemap_hints(result: SitemapResult) -> dict[str, SitemapEntry]:
    """A sitemap's entries that carry a lastmod or a changefreq, by their loc."""
    return {e.loc: e for e in result.urls if e.changefreq or e.lastmod is not None}


def with_sitemap_hints(hints: dict[str, SitemapEntry], rows: list[NewUrl]) -> list[NewUrl]:
    """``rows`` with the lastmod / changefreq of their sitemap entry in ``hints``
    (:func:`sitemap_hints`): the recrawl prior of each URL."""
    return [dataclasses.replace(row, sitemap_changefreq=hints[row.url].changefreq,
                                sitemap_lastmod=hints[row.url].lastmod)
            if row.url in hints else row for row in rows]


def names_another(canonical: str | None, url_key: bytes) -> bool:
    """True when a page's rel=canonical names a different URL (it is a non-canonical copy)."""
    if canonical is None:
        return False
    try:
        return canonicalize(canonical).url_key != url_key
    except InvalidURL:
        return False


#: the frontier's denial reasons (frontier/scheduler.py) → outcome, and → error_kind
_DENIED_OUTCOMES: dict[str, Outcome] = {
    "robots": Outcome.ROBOTS_DENIED, "blocked": Outcome.BLOCKED,
    "blocked_address": Outcome.BLOCKED}
_DENIED_KINDS: dict[str, str | None] = {
    "robots": None, "blocked": "policy_blocked", "blocked_address": "blocked"}


def truncated_reason(error_kind: str | None) -> str | None:
    """"length", "time"… when the commit's body was cut short (see FetchResponse)."""
    if error_kind is None or not error_kind.startswith("truncated_"):
        return None
    return error_kind.removeprefix("truncated_")


def recrawl_policy(config: CrawlConfig) -> RecrawlPolicy:
    """The recrawl policy with ``--recrawl-interval`` as its prior interval."""
    day = 24 * 3600.0
    interval = config.recrawl_interval
    return RecrawlPolicy(min_interval=min(day, interval), default_interval=interval,
                         max_interval=max(30 * day, interval))


def refresh_planner(config: CrawlConfig, policy: RecrawlPolicy) -> RefreshPlanner:
    """The expected-gain planner of ``--tier`` tiers under ``--daily-budget``."""
    from courtier.frontier.tiers import TierSet

    tiers = TierSet.from_specs(config.tiers, config.recrawl_interval)
    return RefreshPlanner(tiers, policy, BudgetController(config.daily_budget,
                                                          config.tail_share))


class PageProcessor:
    def __init__(self, config: CrawlConfig, intake: Intake, archive: ArchiveWriter,
                 agent_token: str) -> None:
        self.config = config
        self.intake = intake
        self.archive = archive
        self.agent = agent_token
        self.figures = PageFigures()
        self.policy = recrawl_policy(config)
        self.duplicates = DuplicateTracker(switch=CompiledSwitch())
        self.planner = refresh_planner(config, self.policy)

    def _commit(self, lease: Lease, due: DueUrl, outcome: Outcome, now: float,
                changed: bool = False, **fields: Any) -> FetchCommit:
        warc = fields.pop("_warc", None)
        page_info = fields.pop("_page", None) or page_fields(None, None)
        content_language = fields.pop("_content_language", None)
        stats = ChangeStats.from_json(json.loads(due.change_stats)) if due.change_stats else \
            ChangeStats()
        non_canonical = bool(fields.pop("_non_canonical", False))
        plan = self.planner.schedule(
            due, outcome, fields.get("status"), stats, now, changed=changed,
            non_canonical=non_canonical or bool(fields.get("near_dup_of")),
            keep_priority=due.priority >= SEED_PRIORITY)
        next_at, stats = plan.next_fetch_at, plan.stats
        if plan.priority is not None:
            fields["priority"] = plan.priority
        fields.update(value=plan.value, tier=plan.tier)
        fields.setdefault("next_fetch_at", next_at)
        next_fetch_at = fields.pop("next_fetch_at")
        commit = FetchCommit(
            url_key=due.url_key, url=due.url, host_key=due.host_key, shard=due.shard,
            version=due.version, epoch=lease.epoch, outcome=outcome, fetched_at=now,
            next_fetch_at=next_fetch_at, robots_digest=lease.robots_digest,
            delay_applied=lease.delay, change_stats=json.dumps(stats.to_json()),
            interval=0.0 if next_fetch_at is None else next_fetch_at - now, **fields,
        )
        commit.event = fetch_event(
            kind="fetch", outcome=str(outcome), status=commit.status, fetched_at=now,
            url=due.url, content_type=commit.content_type, content_language=content_language,
            content_length=commit.content_length, payload_digest=commit.payload_digest,
            simhash=commit.simhash, near_dup_of=commit.near_dup_of,
            redirect_to=commit.redirect_to, redirect_hops=due.redirect_hops,
            redirect_chain=chain_hops(due.redirect_chain),
            changed=changed if outcome is Outcome.OK else None, warc=warc,
            error_kind=commit.error_kind, page=page_info)
        commit.event["truncated"] = truncated_reason(commit.error_kind)
        commit.event["url"] = due.url
        commit.event["outcome"] = str(outcome)
        if log.isEnabledFor(logging.DEBUG):
            name = _OUTCOME_EVENTS.get(outcome, "fetch")
            log_event(log, logging.DEBUG, name, "%s %s: %s", due.url, commit.status or "-",
                      outcome, host=due.host_key, url=due.url, shard=due.shard,
                      outcome=str(outcome), reason=commit.error_kind, status=commit.status)
        return commit

    def denied(self, due: DueUrl, reason: str, digest: str | None, epoch: int,
               now: float) -> FetchCommit:
        """A URL not fetched: robots.txt disallows it (no error_kind), a policy blocks its
        host (``policy_blocked``), the SSRF guard refused its address (``blocked``), its
        host's robots.txt stayed unreachable (``robots_unreachable:<why>``; the cycle ends,
        it returns at recrawl), or its http host upgrades to https (``digest`` is then the
        https host key: :meth:`upgraded`)."""
        if reason == UPGRADE_KIND and digest is not None:
            return self.upgraded(due, digest, epoch, now)
        self.figures.denied += 1
        outcome = _DENIED_OUTCOMES.get(reason, Outcome.ERROR)
        lease = Lease(kind=LeaseKind.PAGE, host_key=due.host_key, url=due.url, issued_at=now,
                      epoch=epoch, delay=0.0, due=due, robots_digest=digest)
        error_kind = _DENIED_KINDS.get(reason, reason)
        return self._commit(lease, due, outcome, now, error_kind=error_kind)

    def upgraded(self, due: DueUrl, https_host_key: str, epoch: int,
                 now: float) -> FetchCommit:
        """An http URL whose host redirects its URLs to https, settled without a request:
        outcome ``redirect`` to its https twin, no status, ``error_kind`` ``https_upgrade``;
        the twin is taken in as a redirect's target is (one more hop, within the
        ``max-redirect-hops`` setting; the hop's status in its chain is
        :data:`~courtier.crawl.https_upgrade.UPGRADE_HOP_STATUS`)."""
        lease = Lease(kind=LeaseKind.PAGE, host_key=due.host_key, url=due.url, issued_at=now,
                      epoch=epoch, delay=0.0, due=due)
        twin = https_twin(due.url, due.host_key, https_host_key)
        new_urls: list[NewUrl] = []
        try:
            target = canonicalize(twin)
        except InvalidURL:  # not expected: the twin of a canonical URL is canonical
            target = None
        hops = due.redirect_hops + 1
        if target is not None and hops <= self.config.max_redirect_hops:
            chain = extend_chain(due.redirect_chain, due.url, UPGRADE_HOP_STATUS)
            new = self.intake.make(target, due.depth, now, redirect_hops=hops,
                                   redirect_chain=chain)
            if new is not None:
                new_urls.append(new)
        return self._commit(lease, due, Outcome.REDIRECT, now, new_urls=new_urls,
                            redirect_to=twin, error_kind=UPGRADE_KIND)

    def failed(self, lease: Lease, exc: FetchError, now: float) -> FetchCommit:
        """No usable response: retry with capped back-off, or give up after max_retries."""
        assert lease.due is not None
        self.figures.errors += 1
        if isinstance(exc, BlockedAddressError):
            return self._commit(lease, lease.due, Outcome.BLOCKED, now,
                                             error_kind=exc.kind)
        return self._retry(lease, lease.due, now, error_kind=exc.kind)

    def _retry(self, lease: Lease, due: DueUrl, now: float, **fields: Any) -> FetchCommit:
        failures = due.failure_count + 1
        if failures > self.config.max_retries:
            return self._commit(lease, due, Outcome.ERROR, now, failure_count=0,
                                             **fields)
        return self._commit(lease, due, Outcome.RETRY, now,
                                         failure_count=failures, **fields)

    def fetched(self, lease: Lease, resp: FetchResponse, now: float,
                first_copy: FirstCopy | None = None,
                parsed: ParsedPage | Literal[False] | None = False,
                sitemap: SitemapResult | None = None,
                sitemap_rows: list[NewUrl] | None = None) -> FetchCommit:
        """An HTTP response: archive it, classify it, extract links from HTML.

        ``first_copy`` is where an identical payload was archived before (from the
        store's payload index); the response is then written as a revisit record.
        ``parsed`` is a page already parsed under a time budget (None: the budget ran
        out, the page is kept without links; False: parse it here); ``sitemap`` a
        sitemap already parsed off the loop (None: parse it here if it is one), and
        ``sitemap_rows`` its entries already taken in (None: take them in here).
        """
        due = lease.due
        assert due is not None
        self.figures.fetched += 1
        self.figures.bytes += len(resp.raw_body)
        status = resp.status
        content_type = cap_text(resp.header("content-type"), MAX_HEADER_CHARS)
        fields: dict[str, Any] = {"status": status, "content_type": content_type,
                                  "content_length": len(resp.body)}
        record = self._archive(due, resp, now, first_copy)
        loc = record.location
        fields["_warc"] = {"file": loc.file, "offset": loc.offset, "length": loc.length,
                           "revisit": status == 304 or first_copy is not None}
        fields["_content_language"] = resp.header("content-language")
        if status != 304:
            fields.update(warc_file=loc.file, warc_offset=loc.offset, warc_length=loc.length,
                          payload_digest=record.payload_digest)
        if resp.truncated is not None:
            fields["error_kind"] = f"truncated_{resp.truncated}"
        if 200 <= status < 300 and resp.truncated in TRANSIENT_CUTS:
            # cut short by time or by the server: archived as truncated, fetched again
            self.figures.errors += 1
            return self._retry(lease, due, now, **fields)
        if 200 <= status < 300:
            return self._ok(lease, due, resp, now, record, fields, parsed, sitemap,
                            sitemap_rows)
        if status == 304:
            return self._commit(lease, due, Outcome.NOT_MODIFIED, now, **fields)
        if 300 <= status < 400:
            return self._redirect(lease, due, resp, now, fields)
        if status in (404, 410):
            return self._commit(lease, due, Outcome.GONE, now, **fields)
        if status == 429 or status >= 500:
            self.figures.errors += 1
            return self._retry(lease, due, now, **fields)
        return self._commit(lease, due, Outcome.HTTP_ERROR, now, **fields)

    def not_html(self, lease: Lease, resp: FetchResponse, now: float) -> FetchCommit:
        """A 2xx whose type was not asked for (``resp.truncated == "type"``): its body was
        not read (or not past the sniff window), nothing is archived, and the URL is due
        again only after the longest recrawl interval (a file seldom turns into a page)."""
        due = lease.due
        assert due is not None
        self.figures.fetched += 1
        self.figures.bytes += len(resp.raw_body)
        content_type = cap_text(resp.header("content-type"), MAX_HEADER_CHARS)
        return self._commit(lease, due, Outcome.NOT_HTML, now, status=resp.status,
                            content_type=content_type)

    def _archive(self, due: DueUrl, resp: FetchResponse, now: float,
                 first_copy: FirstCopy | None) -> ArchivedRecord:
        if resp.status == 304:
            self.figures.revisits += 1
            return self.archive.write_revisit(resp, due.url, due.last_fetch_at or now, None,
                                              REVISIT_NOT_MODIFIED, warc_date=now)
        if first_copy is not None and first_copy.url != due.url:
            self.figures.revisits += 1
            self.duplicates.exact += 1
            return self.archive.write_revisit(resp, first_copy.url, first_copy.fetched_at, None,
                                              REVISIT_IDENTICAL_DIGEST, warc_date=now)
        record = self.archive.write_exchange(resp, warc_date=now)
        if 200 <= resp.status < 300:
            self.duplicates.archived(record.payload_digest, FirstCopy(
                due.url, now, record.location.file, record.location.offset))
        return record

    def _ok(self, lease: Lease, due: DueUrl, resp: FetchResponse, now: float,
            record: ArchivedRecord, fields: dict[str, Any],
            parsed: ParsedPage | Literal[False] | None = False,
            sitemap: SitemapResult | None = None,
            sitemap_rows: list[NewUrl] | None = None) -> FetchCommit:
        fields.update(etag=whole_or_none(resp.header("etag"), MAX_VALIDATOR_CHARS),
                      last_modified=whole_or_none(resp.header("last-modified"),
                                                  MAX_VALIDATOR_CHARS))
        changed = due.payload_digest is None or record.payload_digest != due.payload_digest
        new_urls: list[NewUrl] = []
        content_type = fields["content_type"]
        if resp.truncated is None and is_html(content_type) and parsed is None:
            fields["error_kind"] = "parse_budget"  # archived and committed, links not read
        elif resp.truncated is None and is_html(content_type):
            page = parsed or parse_page_words(
                resp.body, due.url, content_type, resp.header("x-robots-tag"), self.agent)
            fields["title"] = page.title
            fields["_non_canonical"] = names_another(page.canonical, due.url_key)
            fields["_page"] = page_fields(page, resp.header("x-robots-tag"))
            fp, twin = self.duplicates.fingerprint(due.url_key, page.text)
            fields["simhash"], fields["near_dup_of"] = fp, twin
            threshold = self.config.change_distance
            if changed and threshold is not None and due.simhash is not None:
                # new bytes, but only a change if the text moved (ads, dates, session ids…)
                changed = hamming(fp, due.simhash) > threshold
            if self.intake.traps is not None:
                self.intake.traps.observe_fetched(
                    due.host_key, url_template(path_of(due.url)), fp)
            if twin is not None:
                self.figures.near_duplicates += 1
            if not page.meta_nofollow:
                raws = [link.url for link in page.links if not link.nofollow]
                new_urls = self.intake.links(raws, due.depth + 1, now)
        elif sitemap is not None or (
                resp.truncated is None and looks_like_sitemap(due.url, content_type, resp.body)):
            new_urls = self._sitemap(due, resp, now, sitemap, sitemap_rows)
        self.figures.links += len(new_urls)
        return self._commit(lease, due, Outcome.OK, now, changed=changed,
                                         new_urls=new_urls, **fields)

    def _sitemap(self, due: DueUrl, resp: FetchResponse, now: float,
                 parsed: SitemapResult | None,
                 rows: list[NewUrl] | None = None) -> list[NewUrl]:
        """The rows of a sitemap's entries: ``rows`` when the caller took them in already
        (in steps, off the loop's critical path: ``crawl/sitemap_hints.py``)."""
        result = parsed if parsed is not None else parse_sitemap(resp.body, due.url)
        raws = [entry.loc for entry in result.urls] + result.sitemaps
        self.figures.sitemap_urls += len(raws)
        if rows is not None:
            return rows
        rows = self.intake.links(raws, due.depth + 1, now, priority=SITEMAP_PRIORITY,
                                 check_traps=False)
        return with_sitemap_hints(sitemap_hints(result), rows)

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
                    chain = extend_chain(due.redirect_chain, due.url, resp.status)
                    new = self.intake.make(target, due.depth, now, redirect_hops=hops,
                                           redirect_chain=chain)
                    if new is not None:
                        new_urls.append(new)
        return self._commit(lease, due, Outcome.REDIRECT, now, new_urls=new_urls,
                                         **fields)
