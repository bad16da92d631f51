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
        self.duplicates = Counter("courtier_duplicates", "duplicates found", ["kind"],
                                  registry=r)
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
