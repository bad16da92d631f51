"""The fetch of one lease, page or robots.txt (:class:`Fetcher`).

A page fetch: write-ahead day counts, the fencing check, the request, the
frontier's feedback (delay, back-off, Retry-After), then off-loop parsing and the
commit record handed to the :class:`~courtier.crawl.committer.Committer`. A cancelled
fetch (stop, lost or drained shard, self-fencing) gives its URL back to the frontier
unchanged.

Owns: the fetch limits (pages and robots.txt), the store's payload index lookups, the
off-loop parsers, until when a WARC write error pauses new fetches, discovered rows
whose intake failed (queued again by :meth:`requeue`), and the import of the SimHash
code (numpy) in a thread from the first page request on, awaited before the first page
is processed (``crawl/off_loop_load.py``: not before the crawl's first request).

Invariants: every lease handed to :meth:`fetch` ends in exactly one of a result handed to
the committer, a URL released or returned to the frontier (with its host's in-flight slot
freed), or a deferral; nothing is archived without being committed or released.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from courtier.archive.warc_fields import sha256_digest
from courtier.cluster.ip_slots import IpSlots
from courtier.core.clock import Clock
from courtier.core.config import CrawlConfig
from courtier.core.errors import (
    ArchiveError,
    BlockedAddressError,
    FetchError,
    InvalidURL,
    SendRefused,
    StoreError,
)
from courtier.core.logs import log_event
from courtier.core.urls import canonicalize
from courtier.crawl.committer import Committer
from courtier.crawl.day_limits import DayLimits
from courtier.crawl.https_upgrade import PERMANENT_REDIRECTS, upgrade_target
from courtier.crawl.intake import Intake
from courtier.crawl.metrics import CrawlMetrics, status_class
from courtier.crawl.off_loop_load import OffLoopLoad
from courtier.crawl.process import (
    HTML_TYPES,
    SITEMAP_PRIORITY,
    PageProcessor,
    is_html,
    looks_like_sitemap,
)
from courtier.crawl.sitemap_hints import lastmod_hints, sitemap_rows
from courtier.dedup.pages import FirstCopy, fingerprinting_loaded, load_fingerprinting
from courtier.dedup.payload_lookups import PayloadLookups
from courtier.fetch.accept import looks_like_sitemap_url, page_accept
from courtier.fetch.sniff import media_type, type_label
from courtier.fetch.transport import FetchLimits, FetchRequest, FetchResponse, Transport
from courtier.frontier.lease import FetchFeedback, Lease, LeaseKind
from courtier.frontier.scheduler import Frontier
from courtier.parse.html import ParsedPage
from courtier.parse.offload import OffLoopParser
from courtier.parse.sitemaps import MAX_SITEMAP_BYTES, SitemapResult
from courtier.politeness.audit import LeaseAuditor
from courtier.politeness.delays import parse_retry_after
from courtier.politeness.robots import MAX_ROBOTS_BYTES
from courtier.politeness.robots_offload import parse_off_loop
from courtier.politeness.robots_state import INCOMPLETE_ROBOTS, RobotsStatus
from courtier.store.base import HostRecord, NewUrl, Store

log = logging.getLogger("courtier.worker")

#: body cuts by a size cap: a sitemap cut so is still read up to the cut
SIZE_CUTS = frozenset({"length", "decoded"})
ARCHIVE_RETRY = 5.0      # seconds to wait after a WARC write error (disk full…)


def fetch_limits(config: CrawlConfig) -> FetchLimits:
    """The caps of one page fetch, from the configuration."""
    return FetchLimits(
        connect_timeout=config.connect_timeout, read_timeout=config.read_timeout,
        total_timeout=config.total_timeout, max_body_bytes=config.max_body_bytes,
        max_decoded_bytes=config.max_decoded_bytes,
        low_speed_limit=config.low_speed_limit, low_speed_time=config.low_speed_time,
        header_timeout=config.header_timeout,
    )


def page_types(config: CrawlConfig) -> frozenset[str]:
    """The media types a page fetch reads: HTML, XHTML and ``--accept-type``."""
    return frozenset(HTML_TYPES) | {kind.lower() for kind in config.accept_types}


class Fetcher:
    """Fetches leases and hands their results on."""

    def __init__(self, config: CrawlConfig, store: Store, transport: Transport, clock: Clock,
                 intake: Intake, agent: str, frontier: Frontier, processor: PageProcessor,
                 committer: Committer, day_limits: DayLimits, auditor: LeaseAuditor,
                 metrics: CrawlMetrics, may_start: Callable[[], bool],
                 ip_slots: IpSlots | None,
                 recall_traps: Callable[[str], Awaitable[None]] | None = None,
                 answered: Callable[[], None] | None = None) -> None:
        self.config = config
        self.store = store
        self.transport = transport
        self.clock = clock
        self.intake = intake
        self.agent = agent
        self.frontier = frontier
        self.processor = processor
        self.committer = committer
        self.day_limits = day_limits
        self.auditor = auditor
        self.metrics = metrics
        #: False once this worker may not start a request (self-fencing; always True alone)
        self.may_start = may_start
        #: the store's per-IP slots (many workers), or None (one process: the frontier's cap)
        self.ip_slots = ip_slots
        #: brings a host's trap statistics back from the store when they left the tracker's
        #: working set, before a page of the host is processed (cluster/shard_state.py)
        self.recall_traps = recall_traps
        #: told by the fetch task once its answer is whole: a fence no longer cuts it
        #: (crawl/in_flight.py), its result goes on to the committer
        self.answered = answered or _nothing
        self.limits = fetch_limits(config)
        #: the types a page fetch reads (other bodies stop after the headers: not_html)
        self.page_types = page_types(config)
        #: a sitemap-named URL: the protocol's 50 MiB (decoded), whatever the page caps
        self.sitemap_limits = dataclasses.replace(
            self.limits, max_body_bytes=max(self.limits.max_body_bytes, MAX_SITEMAP_BYTES),
            max_decoded_bytes=max(self.limits.max_decoded_bytes, MAX_SITEMAP_BYTES))
        self.robots_limits = dataclasses.replace(
            self.limits, max_body_bytes=MAX_ROBOTS_BYTES, max_decoded_bytes=MAX_ROBOTS_BYTES)
        #: the store's payload index, asked for many fetches at once
        self.payload_lookups = PayloadLookups(store)
        # the crawl's page text only feeds SimHash: not collapsed (the same words)
        self.parsers = OffLoopParser(timeout=config.parse_timeout,
                                     on_wait=metrics.parse_wait.observe, collapse_text=False)
        metrics.parse_queue.set_function(lambda: self.parsers.unfinished)
        #: no new fetch before this (a WARC write failed)
        self.archive_trouble_until = float("-inf")
        #: discovered rows whose intake failed (store error), queued again by :meth:`requeue`
        self._unqueued: list[NewUrl] = []
        #: numpy and the SimHash code, imported in a thread from the first page request on
        self.fingerprinting = OffLoopLoad(load_fingerprinting, fingerprinting_loaded)

    async def requeue(self) -> None:
        """Queue the rows an earlier intake failed to (kept again if this fails too)."""
        if self._unqueued:
            rows, self._unqueued = self._unqueued, []
            try:
                await self.store.add_urls(rows)
            except StoreError:
                self._unqueued = rows + self._unqueued
                raise

    async def close(self) -> None:
        """No fetch asks any more: the payload lookups end (the parsers end with
        :meth:`close_parsers`, after the last commit)."""
        await self.payload_lookups.close()

    def close_parsers(self) -> None:
        self.parsers.close()

    def _give_back(self, lease: Lease) -> None:
        """A lease not sent (fenced): its slot is freed and its URL returned unchanged."""
        self.auditor.on_finish(lease.host_key)
        self.frontier.return_lease(lease)
        self.metrics.fenced_requests.inc()
        self.metrics.re_lease("fenced")

    def _request(self, lease: Lease) -> FetchRequest:
        headers = [("User-Agent", self.config.user_agent)]
        accept = page_accept(lease.url) if lease.kind is LeaseKind.PAGE else None
        if accept is not None:
            headers.append(("Accept", accept))
        due = lease.due
        if due is not None:
            if due.etag:
                headers.append(("If-None-Match", due.etag))
            if due.last_modified:
                headers.append(("If-Modified-Since", due.last_modified))
        if lease.kind is LeaseKind.PAGE and accept is not None:
            # a page, not robots.txt or a file named like a sitemap: only the wanted types
            return FetchRequest(lease.url, headers, only_types=self.page_types)
        return FetchRequest(lease.url, headers)

    async def fetch(self, lease: Lease) -> None:
        """Fetch ``lease`` (robots.txt or page) and hand its result on."""
        token = await self._ip_slot(lease) if self.ip_slots is not None else 0
        if token is None:
            return  # the address is busy on other workers: deferred
        try:
            if lease.kind is LeaseKind.ROBOTS:
                await self._fetch_robots(lease)
            else:
                await self._fetch_page(lease)
        finally:
            if token:
                assert lease.ip is not None and self.ip_slots is not None
                self.ip_slots.release(lease.ip, token)

    async def _ip_slot(self, lease: Lease) -> int | None:
        """Many workers: a slot of the store's per-IP cap before a request to a shared
        address (0: none needed). None: not granted; the lease is deferred until the store
        says a slot may be free, and its URL stays in memory."""
        slots = self.ip_slots
        if slots is None or lease.ip is None:
            return 0
        try:
            retry_at = await slots.acquire(lease.ip)
        except asyncio.CancelledError:
            # fenced, drained or stopped while the store was being asked (a stalled or
            # restarting server): nothing was sent, so the host's and the address's
            # in-flight slots and the URL go back, as for any cancelled request
            self.cancelled(lease)
            raise
        if isinstance(retry_at, int):
            return retry_at
        self.auditor.on_finish(lease.host_key)
        self.frontier.defer_lease(lease, retry_at)
        self.metrics.re_lease("deferred")
        return None

    def cancelled(self, lease: Lease) -> None:
        """A lease cancelled before its answer (stop, lost or drained shard, fence), or
        before its fetch began (crawl/in_flight.py): its slot is freed and its URL returned
        unchanged, to be leased again."""
        self.auditor.on_finish(lease.host_key)
        self.frontier.return_lease(lease)
        self.metrics.re_lease("cancelled")

    def _requested(self, lease: Lease, resp: FetchResponse | None) -> None:
        """A request was sent: latency of its answer, and whether it is a refetch."""
        if resp is not None:
            self.metrics.fetch_ttfb.observe(resp.ttfb)
            self.metrics.fetch_duration.observe(resp.elapsed)
        due = lease.due
        if due is not None and due.version > 0:
            self.metrics.refetches.inc()

    async def _fetch_page(self, lease: Lease) -> None:
        try:
            await self.day_limits.write_ahead()  # the count is saved before the request
            if not self.may_start():
                raise SendRefused(f"{lease.url}: fenced before the request")
            limits = self.sitemap_limits if looks_like_sitemap_url(lease.url) else self.limits
            self.fingerprinting.start()  # while the answer is awaited
            resp = await self.transport.fetch(self._request(lease), limits)
            self.answered()
        except SendRefused:
            self._give_back(lease)
            return
        except FetchError as exc:
            self._finished(lease, None)
            if isinstance(exc, BlockedAddressError):  # first: its URLs are denied, not released
                self.frontier.block_address(lease.host_key)
            else:  # a request was tried (the guard's refusal makes none)
                self._requested(lease, None)
            self.frontier.finish_page(lease, FetchFeedback(None, 0.0, None, lease.ip))
            self._count(lease, None)
            commit = self.processor.failed(lease, exc, self.clock.now())
            self.committer.add(commit)
            self.metrics.fetches.labels(str(commit.outcome), "error").inc()
            self.metrics.fetch_errors.labels(exc.kind, "page").inc()
            return
        except asyncio.CancelledError:
            self.cancelled(lease)
            raise
        now = self.clock.now()
        self._finished(lease, resp.status)
        self._requested(lease, resp)
        self.metrics.response(resp.status)
        retry_at = parse_retry_after(resp.header("retry-after"), now)
        self.frontier.finish_page(
            lease, FetchFeedback(resp.status, resp.elapsed, retry_at, resp.remote_ip))
        try:
            await self._after_response(lease, resp, now)
        except asyncio.CancelledError:
            # stopped while parsing or looking up the payload: nothing is committed for
            # this URL, so it goes back to the store as it was
            assert lease.due is not None
            self.frontier.release_url(lease.due, lease.due.next_fetch_at)
            self.metrics.re_lease("cancelled")
            raise

    async def _after_response(self, lease: Lease, resp: FetchResponse, now: float) -> None:
        await self._persist_backoff(lease, now)
        await self._learn_upgrade(lease, resp)
        if resp.truncated == "type":
            # not a type asked for: nothing archived, fetched again after a long while
            commit = self.processor.not_html(lease, resp, now)
            self.committer.add(commit)
            self._count(lease, resp)
            self.metrics.fetches.labels(str(commit.outcome), status_class(resp.status)).inc()
            self.metrics.not_html.labels(type_label(media_type(commit.content_type))).inc()
            self.metrics.bytes.inc(len(resp.raw_body))
            return
        first_copy = await self._first_copy(resp) if 200 <= resp.status < 300 else None
        parsed: ParsedPage | Literal[False] | None = False
        sitemap: SitemapResult | None = None
        content_type = resp.header("content-type")
        if 200 <= resp.status < 300 and resp.truncated is None:
            # anything that might keep the loop busy is parsed off it (parse/offload.py)
            if is_html(content_type):
                parsed = await self.parsers.html(resp.body, lease.url, content_type,
                                                 resp.header("x-robots-tag"), self.agent)
                if parsed is not None and self.recall_traps is not None:
                    # the page and its links meet the trap tracker: with the host's state
                    await self.recall_traps(lease.host_key)
            elif looks_like_sitemap(lease.url, content_type, resp.body):
                sitemap = await self.parsers.sitemap(resp.body, lease.url)
        elif 200 <= resp.status < 300 and resp.truncated in SIZE_CUTS \
                and looks_like_sitemap(lease.url, content_type, resp.body):
            # over the protocol's 50 MiB: the entries before the cut are taken
            log_event(log, logging.WARNING, "sitemap_cut",
                      "sitemap %s is over %d MiB (%s): only the URLs before the cut are "
                      "read", lease.url, MAX_SITEMAP_BYTES >> 20, resp.truncated,
                      url=lease.url, host=lease.host_key, reason=f"truncated_{resp.truncated}")
            sitemap = await self.parsers.sitemap(resp.body, lease.url)
        rows: list[NewUrl] | None = None
        if sitemap is not None and sitemap.cut_reason is not None:
            # the reader stopped early (50,000 entries, 50 MiB decompressed, its time budget)
            taken = len(sitemap.urls) + len(sitemap.sitemaps)
            log_event(log, logging.WARNING, "sitemap_cut",
                      "sitemap %s cut (%s): %d entries taken, the rest dropped", lease.url,
                      sitemap.cut_reason, taken, url=lease.url, host=lease.host_key,
                      reason=sitemap.cut_reason, count=taken)
        if sitemap is not None:
            # before the commit is handed on: a stop while the store is asked releases
            # the URL, which must then have no commit under way
            assert lease.due is not None
            rows = await sitemap_rows(sitemap, self.intake, lease.due.depth + 1, now)
            if sitemap.urls:
                await self._sitemap_changed(lease, sitemap, now)
        await self.fingerprinting.ready()  # the page's SimHash needs it
        try:
            commit = self.processor.fetched(lease, resp, now, first_copy, parsed, sitemap,
                                            rows)
        except ArchiveError as exc:
            # not archived ⇒ not committed: the URL is released and fetched again later
            log_event(log, logging.ERROR, "archive_error",
                      "WARC write failed, pausing before the next fetches: %s", exc,
                      url=lease.url, host=lease.host_key, reason=str(exc))
            self.frontier.release_url(lease.due, now + ARCHIVE_RETRY)
            self.archive_trouble_until = now + ARCHIVE_RETRY
            self.metrics.re_lease("archive_error")
            return
        self.committer.add(commit)
        self._count(lease, resp)
        metrics = self.metrics
        metrics.fetches.labels(str(commit.outcome), status_class(resp.status)).inc()
        metrics.bytes.inc(len(resp.raw_body))
        if first_copy is not None and first_copy.url != lease.url:  # a revisit record
            metrics.duplicates.labels("exact").inc()
        if commit.near_dup_of is not None:
            metrics.duplicates.labels("near").inc()

    async def _sitemap_changed(self, lease: Lease, sitemap: SitemapResult, now: float) -> None:
        """Known URLs whose sitemap ``lastmod`` is later than their last fetch become due
        (a hint: when the store fails it is lost, and the next look at the sitemap gives
        it again)."""
        hints = await lastmod_hints(sitemap, self.intake.tracking, now)
        if not hints:
            return
        try:
            changed = await self.store.sitemap_changed(hints, now)
        except StoreError as exc:
            log.warning("could not apply the lastmod dates of sitemap %s: %s", lease.url, exc)
            return
        if changed:
            log_event(log, logging.INFO, "sitemap_changed",
                      "sitemap %s: %d known URLs changed since their last fetch, due now",
                      lease.url, changed, url=lease.url, host=lease.host_key, count=changed)

    async def _first_copy(self, resp: FetchResponse) -> FirstCopy | None:
        """Where this payload was archived before (exact-duplicate detection)."""
        digest = sha256_digest(resp.raw_body)
        copy = self.processor.duplicates.pending_copy(digest)
        if copy is not None:
            return copy
        found = await self.payload_lookups.find(digest)  # None also when the store failed
        if found is None:
            return None
        warc_file, offset, url, fetched_at = found
        return FirstCopy(url, fetched_at, warc_file, offset)

    async def _discover_sitemaps(self, lease: Lease, sitemaps: Sequence[str]) -> None:
        """Sitemap: lines of a robots.txt (and /sitemap.xml when probing) become URLs."""
        raws = list(sitemaps)
        if self.config.probe_sitemap_xml:
            raws.append(lease.host_key + "/sitemap.xml")
        rows = self.intake.links(raws, 1, self.clock.now(), priority=SITEMAP_PRIORITY,
                                 check_traps=False)
        if rows:
            try:
                await self.store.add_urls(rows)
            except StoreError as exc:
                # kept, and queued again with the next turn of the loop: never lost
                log.warning("could not queue sitemaps of %s yet: %s", lease.host_key, exc)
                self._unqueued.extend(rows)

    def _count(self, lease: Lease, resp: FetchResponse | None) -> None:
        """Per-host counters, written with the next commit batch."""
        due = lease.due
        if due is None:
            return
        stats = self.committer.host_stats(due.host_key, due.shard)
        if resp is None:
            stats.errors += 1
            return
        stats.fetched += 1
        stats.bytes += len(resp.raw_body)
        stats.ttfb_sum += resp.ttfb
        klass = resp.status // 100
        if klass == 2:
            stats.status_2xx += 1
        elif klass == 3:
            stats.status_3xx += 1
        elif klass == 4:
            stats.status_4xx += 1
        elif klass == 5:
            stats.status_5xx += 1
            stats.errors += 1

    async def _learn_upgrade(self, lease: Lease, resp: FetchResponse) -> None:
        """An http URL (page or robots.txt) answered a permanent redirect to its very same
        URL on https: from now on the host's http URLs are settled as redirects to their
        https twins without a request (``crawl/https_upgrade.py``), and the store keeps
        the rule with the host (a restart, the shard's next owner)."""
        if resp.status not in PERMANENT_REDIRECTS:
            return
        target = upgrade_target(lease.url, lease.host_key, resp.status, resp.header("location"))
        host = self.frontier.hosts.get(lease.host_key)
        if target is None or host is None or host.https_upgrade == target:
            return
        self.frontier.upgrade_to_https(host.host_key, target)
        log_event(log, logging.INFO, "https_upgrade",
                  "%s redirects its URLs to %s: its other http URLs are taken as https "
                  "without a request", host.host_key, target, url=lease.url,
                  host=host.host_key, reason=f"{resp.status} to {target}")
        try:
            await self.store.save_https_upgrade(host.host_key, host.shard, target)
        except StoreError as exc:  # this process keeps the rule; a restart learns it again
            log.warning("could not save the https upgrade of %s: %s", host.host_key, exc)

    async def _persist_backoff(self, lease: Lease, now: float) -> None:
        """A long pause (beyond the release horizon) is saved so a restart keeps it."""
        host = self.frontier.hosts.get(lease.host_key)
        if host is None or host.timing.backoff_until <= now + self.frontier.release_horizon:
            return
        try:
            await self.store.save_backoff(host.host_key, host.shard, host.timing.backoff_until)
        except StoreError as exc:
            log.warning("could not save the back-off of %s: %s", host.host_key, exc)

    def _finished(self, lease: Lease, status: int | None) -> None:
        self.auditor.on_finish(lease.host_key)
        if status is None or status == 429 or status >= 500:
            self.metrics.backoffs.inc()
            reason = "error" if status is None else "429" if status == 429 else "5xx"
            self.metrics.backoff_responses.labels(reason).inc()

    async def _fetch_robots(self, lease: Lease) -> None:
        frontier = self.frontier
        body: bytes | None = None
        try:
            if not self.may_start():
                raise SendRefused(f"{lease.url}: fenced before the request")
            resp = await self.transport.fetch(self._request(lease), self.robots_limits)
            self.answered()
            self._requested(lease, resp)
            if 200 <= resp.status < 300 and resp.truncated in INCOMPLETE_ROBOTS:
                raise FetchError(f"{lease.url}: robots.txt cut short ({resp.truncated})")
            parsed = (await parse_off_loop(resp.body, self.agent)
                      if 200 <= resp.status < 300 else None)
        except SendRefused:
            self._give_back(lease)
            return
        except FetchError as exc:
            self._finished(lease, None)
            self.metrics.robots_fetches.labels("error").inc()
            self.metrics.fetch_errors.labels(exc.kind, "robots").inc()
            if isinstance(exc, BlockedAddressError):  # first: its URLs are denied, not released
                frontier.block_address(lease.host_key)
            frontier.finish_robots(lease, None, error_kind=exc.kind, error_detail=str(exc))
        except asyncio.CancelledError:
            self.cancelled(lease)
            raise
        else:
            self.auditor.on_finish(lease.host_key)
            self.metrics.robots_fetches.labels(status_class(resp.status)).inc()
            location = resp.header("location")
            if location:
                try:
                    location = canonicalize(location, base=lease.url).url
                except InvalidURL:
                    location = None
            if 200 <= resp.status < 300:
                body = resp.body[:MAX_ROBOTS_BYTES]
            retry_at = parse_retry_after(resp.header("retry-after"), self.clock.now())
            frontier.finish_robots(lease, resp.status, resp.body, location, resp.remote_ip,
                                   retry_at, parsed)
            await self._learn_upgrade(lease, resp)
            host_state = frontier.hosts.get(lease.host_key)
            if 200 <= resp.status < 300 and host_state and host_state.robots.rules is not None:
                await self._discover_sitemaps(lease, host_state.robots.rules.sitemaps)
            elif 400 <= resp.status < 500 and self.config.probe_sitemap_xml:
                await self._discover_sitemaps(lease, ())
        host = frontier.hosts.get(lease.host_key)
        if host is None:
            return
        robots = host.robots
        rules = robots.rules
        record = HostRecord(
            host_key=host.host_key, shard=host.shard, robots_status=robots.last_status,
            robots_body=body, robots_fetched_at=robots.fetched_at,
            robots_expires_at=robots.expires_at,
            robots_digest=rules.digest if rules is not None else None,
            crawl_delay=rules.crawl_delay(self.agent) if rules is not None else None,
        )
        if robots.status is RobotsStatus.UNREACHABLE and robots.last_error is not None:
            # the reason is stored at once: `courtier url` names it before the URLs give up
            record.robots_error_kind = robots.last_error
            record.robots_error = robots.last_error_detail
            record.robots_error_since = robots.failing_since
            record.robots_error_at = self.clock.now()
        try:
            await self.store.save_robots(record)
        except StoreError as exc:
            log.warning("could not save robots.txt state of %s: %s", host.host_key, exc)


def _nothing() -> None:
    pass
