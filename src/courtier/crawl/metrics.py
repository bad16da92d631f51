"""Prometheus metrics of one crawl process.

Counters are incremented on the hot path (cheap: one dict lookup and an
add); gauges about the frontier (queue depth, robots states, back-offs) are
computed when scraped, from the live frontier, so they cost nothing between
scrapes.
"""

from __future__ import annotations

import heapq
import shutil
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from courtier.core.clock import Clock
from courtier.core.tracking import TrackingParams
from courtier.frontier.scheduler import Frontier

TOP_HOSTS = 10   # bounded label cardinality: only the busiest hosts get a series

#: statuses with a series of their own in ``courtier_responses_total``; any other is "other"
RESPONSE_STATUSES = (200, 204, 206, 301, 302, 303, 304, 307, 308, 400, 401, 403, 404, 410,
                     429, 500, 502, 503, 504)
_STATUS_LABELS = {status: str(status) for status in RESPONSE_STATUSES}
#: hosts with a series of their own in ``courtier_host_politeness_violations_total``
VIOLATION_HOSTS = 20
#: hosts with a series of their own in ``courtier_tls_handshakes_total``
HANDSHAKE_HOSTS = 20
#: the label shared by every status, or host, beyond the bounded set
OTHER = "other"
#: why a lease ended without a result, so that its URL is leased again
RE_LEASE_REASONS = ("cancelled", "fenced", "deferred", "archive_error", "recovered")


def status_label(status: int) -> str:
    """The ``status`` label of a response: the code itself when it is one of
    :data:`RESPONSE_STATUSES`, else ``"other"`` (bounded cardinality)."""
    return _STATUS_LABELS.get(status, OTHER)


class FirstLabels:
    """A bounded label set: the first ``limit`` distinct values keep their own label, every
    later one shares ``"other"`` (the set never changes once full, so a series never moves)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._kept: set[str] = set()

    def label(self, value: str) -> str:
        kept = self._kept
        if value in kept:
            return value
        if len(kept) < self.limit and value != OTHER:
            kept.add(value)
            return value
        return OTHER


#: seconds: bucket bounds of the fetch latency histograms
FETCH_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class _FrontierCollector(Collector):
    def __init__(self, frontier: Frontier, clock: Clock) -> None:
        self.frontier = frontier
        self.clock = clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        frontier, now = self.frontier, self.clock.now()
        queued = GaugeMetricFamily("courtier_queue_depth", "URLs queued in memory")
        queued.add_metric([], frontier.queued)
        yield queued
        in_flight = GaugeMetricFamily("courtier_in_flight", "fetches in flight")
        in_flight.add_metric([], frontier.in_flight)
        yield in_flight
        states: dict[str, int] = {}
        backing_off = 0
        oldest = 0.0
        for host in frontier.hosts.values():
            states[str(host.robots.status)] = states.get(str(host.robots.status), 0) + 1
            if host.timing.backoff_until > now:
                backing_off += 1
            if host.robots.fetched_at:
                oldest = max(oldest, now - host.robots.fetched_at)
        robots = GaugeMetricFamily("courtier_robots_hosts", "hosts by robots.txt state",
                                   labels=["state"])
        for state, count in sorted(states.items()):
            robots.add_metric([state], count)
        yield robots
        age = GaugeMetricFamily("courtier_robots_cache_age_max_seconds",
                                "age of the oldest robots.txt copy in use")
        age.add_metric([], oldest)
        yield age
        backoff = GaugeMetricFamily("courtier_hosts_in_backoff", "hosts pausing now")
        backoff.add_metric([], backing_off)
        yield backoff
        hosts = GaugeMetricFamily("courtier_hosts_active", "hosts with queued or in-flight work")
        hosts.add_metric([], frontier.active_hosts())
        yield hosts
        top = GaugeMetricFamily(
            "courtier_host_queue_depth",
            f"URLs queued in memory for the {TOP_HOSTS} hosts with the most (others omitted)",
            labels=["host"])
        busiest = heapq.nlargest(TOP_HOSTS, frontier.hosts.values(),
                                 key=lambda h: len(h.queue) + h.in_flight)
        for host in busiest:
            if host.queue or host.in_flight:
                top.add_metric([host.host_key], len(host.queue) + host.in_flight)
        yield top
        shards = GaugeMetricFamily("courtier_shards_owned",
                                   "shards whose lease this process holds")
        shards.add_metric([], len(frontier.epochs))
        yield shards


class _SpoolCollector(Collector):
    """Free and total bytes of the filesystem holding the crawl home (one statvfs a scrape)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            usage = shutil.disk_usage(self.path)
        except OSError:
            return
        free = GaugeMetricFamily("courtier_spool_free_bytes",
                                 "bytes free to courtier on the filesystem of --data")
        free.add_metric([], usage.free)
        yield free
        size = GaugeMetricFamily("courtier_spool_size_bytes",
                                 "size in bytes of the filesystem of --data")
        size.add_metric([], usage.total)
        yield size


class _TrackingCollector(Collector):
    """``courtier_tracking_params_removed_total`` from the intake's own count."""

    def __init__(self, tracking: TrackingParams) -> None:
        self.tracking = tracking

    def collect(self) -> Iterator[CounterMetricFamily]:
        removed = CounterMetricFamily(
            "courtier_tracking_params_removed",
            "tracking query parameters (utm_*, gclid, fbclid…) removed from URLs taken in")
        removed.add_metric([], self.tracking.removed)
        yield removed


class CrawlMetrics:
    """The registry and instruments of one crawl process."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.fetches = Counter("courtier_fetches", "finished fetches",
                               ["outcome", "status_class"], registry=r)
        self.bytes = Counter("courtier_fetched_bytes", "payload bytes fetched", registry=r)
        self.backoffs = Counter("courtier_backoffs", "times a host was paused (429/5xx/errors)",
                                registry=r)
        self.backoff_responses = Counter(
            "courtier_backoff_responses",
            "fetches that paused their host, by reason (429, 5xx, error: no response)",
            ["reason"], registry=r)
        self.durability_lag = Gauge(
            "courtier_durability_lag_seconds",
            "age of the oldest fetch result (and the URLs it discovered) not yet committed",
            registry=r)
        self.politeness_violations = Counter(
            "courtier_politeness_violations",
            "lease starts that broke a host's delay or in-flight cap (must stay 0)", registry=r)
        self.robots_fetches = Counter("courtier_robots_fetches", "robots.txt fetches",
                                      ["status_class"], registry=r)
        self.duplicates = Counter(
            "courtier_duplicates",
            "duplicates found (exact: same payload under another URL; near: SimHash twin)",
            ["kind"], registry=r)
        for kind in ("exact", "near"):
            self.duplicates.labels(kind)
        self.responses = Counter(
            "courtier_responses",
            "page responses by status (common codes; any other is \"other\")",
            ["status"], registry=r)
        for status in (*_STATUS_LABELS.values(), OTHER):
            self.responses.labels(status)
        self.fetch_ttfb = Histogram(
            "courtier_fetch_ttfb_seconds",
            "time to first byte of page and robots.txt responses (request sent to headers)",
            buckets=FETCH_BUCKETS, registry=r)
        self.fetch_duration = Histogram(
            "courtier_fetch_duration_seconds",
            "total time of page and robots.txt responses (request sent to body read)",
            buckets=FETCH_BUCKETS, registry=r)
        self.refetches = Counter(
            "courtier_refetches",
            "page fetches (a response or a network error) of a URL whose earlier fetch "
            "cycle was committed: recrawls and retries", registry=r)
        self.re_leases = Counter(
            "courtier_re_leases",
            "leases that ended without a result, so their URL is leased again, by reason",
            ["reason"], registry=r)
        for reason in RE_LEASE_REASONS:
            self.re_leases.labels(reason)
        self.links_found = Counter(
            "courtier_links_found",
            "links, redirect targets and sitemap entries of fetched pages that passed the "
            "scope and trap rules (distinct on each page)", registry=r)
        self.links_known = Counter(
            "courtier_links_known",
            "of courtier_links_found, those the crawl already knew", registry=r)
        self.parse_queue = Gauge(
            "courtier_parse_queue",
            "pages and sitemaps handed to a parse thread or child process, not yet parsed",
            registry=r)
        self.parse_wait = Histogram(
            "courtier_parse_wait_seconds",
            "how long a page or sitemap handed off the loop waited for a parse thread or "
            "child process to start it",
            buckets=(0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30), registry=r)
        self.daily_budget_spent = Counter(
            "courtier_daily_budget_spent",
            "times the daily budget (--daily-budget) began holding fetches back", registry=r)
        self.host_day_caps = Counter(
            "courtier_host_day_caps",
            "times a host reached its pages-per-day cap (policy max-pages-per-day)",
            registry=r)
        self.host_politeness_violations = Counter(
            "courtier_host_politeness_violations",
            f"courtier_politeness_violations by host (the first {VIOLATION_HOSTS} hosts; "
            "later ones as \"other\")", ["host"], registry=r)
        self._violation_hosts = FirstLabels(VIOLATION_HOSTS)
        self.tls_handshakes = Counter(
            "courtier_tls_handshakes",
            "TLS handshakes (new https connections; kept-alive ones make none) by host (the "
            f"first {HANDSHAKE_HOSTS} hosts; later ones as \"other\") and session (new: a "
            "full handshake, resumed: an earlier session resumed)",
            ["host", "session"], registry=r)
        self._handshake_hosts = FirstLabels(HANDSHAKE_HOSTS)
        self.fetch_errors = Counter(
            "courtier_fetch_errors",
            "fetches that ended without a response, by the failure's class (error_kind: dns, "
            "refused, connect, connect_timeout, header_timeout, timeout, reset, tls_*, "
            "protocol, blocked, error) and by what was fetched (robots, page)",
            ["kind", "target"], registry=r)
        self.not_html = Counter(
            "courtier_not_html",
            "page fetches stopped after the headers (or the first 512 bytes): a type not "
            "asked for, by family (pdf, image, video, audio, font, xml, json, javascript, "
            "css, text, archive, unknown, other)", ["type"], registry=r)
        self.stale_commits = Counter("courtier_stale_commits",
                                     "commits ignored (repeated or fenced)", registry=r)
        self.events_emitted = Counter("courtier_outbox_events",
                                      "events appended to the outbox (applied commits)",
                                      registry=r)
        self.shard_leases_lost = Counter("courtier_shard_leases_lost",
                                         "shards whose lease this process lost", registry=r)
        self.shard_moves = Counter(
            "courtier_shard_moves",
            "shards gained (gained, takeover: from an expired owner) or handed over (handover)",
            ["kind"], registry=r)
        self.store_pauses = Counter(
            "courtier_store_pauses",
            "times the crawl loop paused because the store did not answer", registry=r)
        self.drain_cancelled_requests = Counter(
            "courtier_drain_cancelled_requests",
            "requests cancelled in flight because a graceful handover's drain outlasted its "
            "timeout (the new owner fetches them again)", registry=r)
        self.fenced_requests = Counter(
            "courtier_fenced_requests",
            "requests not sent, or cancelled in flight, because the shard leases could not "
            "be renewed in time or were lost to another worker",
            registry=r)
        self.consumer_lag = Gauge(
            "courtier_outbox_consumer_lag_events",
            "outbox events after the last cursor read through the API (capped at 10,000)",
            registry=r)
        self.warc_upload_backlog = Gauge(
            "courtier_warc_upload_backlog_segments",
            "closed WARC segments in the local spool not yet uploaded and verified",
            registry=r)
        self.pending_commits = Gauge("courtier_pending_commits",
                                     "fetch results waiting for the next commit batch",
                                     registry=r)
        self.known_urls = Gauge(
            "courtier_known_urls",
            "URL keys of the shards this worker holds kept exactly in memory (the "
            "owner-local URL state: links to them are decided without the store)",
            registry=r)
        self.known_url_shards_loading = Gauge(
            "courtier_known_url_shards_loading",
            "held shards whose known URL keys are still being read (they join the refill "
            "once read)", registry=r)
        self.commit_seconds = Histogram(
            "courtier_store_commit_seconds", "store write latency of one commit batch",
            buckets=(0.001, 0.005, 0.02, 0.1, 0.5, 2, 10, 60), registry=r)
        self.eligible_lag = Histogram(
            "courtier_eligible_lag_seconds", "from a URL being due to its lease",
            buckets=(1, 5, 30, 60, 300, 600, 1800, 3600, 6 * 3600, 24 * 3600), registry=r)
        self.loop_lag = Histogram(
            "courtier_event_loop_lag_seconds",
            "how late the event loop ran a timer (time it spent without yielding)",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5), registry=r)
        self.loop_lag_max = Gauge("courtier_event_loop_lag_max_seconds",
                                  "longest event-loop stall seen by this process", registry=r)
        self._frontier: _FrontierCollector | None = None
        self._spool: _SpoolCollector | None = None
        self._tracking: _TrackingCollector | None = None

    def response(self, status: int) -> None:
        """A page response with this status."""
        self.responses.labels(status_label(status)).inc()

    def re_lease(self, reason: str, count: int = 1) -> None:
        """``count`` leases ended without a result (``reason`` in :data:`RE_LEASE_REASONS`)."""
        if reason not in RE_LEASE_REASONS:
            raise ValueError(f"unknown re-lease reason {reason!r}")
        self.re_leases.labels(reason).inc(count)

    def politeness_violation(self, host: str) -> None:
        """A lease start broke ``host``'s delay or in-flight cap."""
        self.politeness_violations.inc()
        self.host_politeness_violations.labels(self._violation_hosts.label(host)).inc()

    def tls_handshake(self, host: str, resumed: bool) -> None:
        """A TLS handshake with ``host`` completed (``resumed``: an earlier session)."""
        self.tls_handshakes.labels(self._handshake_hosts.label(host),
                                   "resumed" if resumed else "new").inc()

    def bind_frontier(self, frontier: Frontier, clock: Clock) -> None:
        """Report live frontier gauges on every scrape."""
        if self._frontier is None:
            self._frontier = _FrontierCollector(frontier, clock)
            self.registry.register(self._frontier)

    def bind_spool(self, path: Path) -> None:
        """Report the free space of ``path``'s filesystem on every scrape."""
        if self._spool is None:
            self._spool = _SpoolCollector(path)
            self.registry.register(self._spool)

    def bind_tracking(self, tracking: TrackingParams) -> None:
        """Report the tracking parameters ``tracking`` has removed on every scrape."""
        if self._tracking is None:
            self._tracking = _TrackingCollector(tracking)
            self.registry.register(self._tracking)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)


def status_class(status: int | None) -> str:
    return "error" if status is None else f"{status // 100}xx"
