"""Capacity planning: pure arithmetic from a crawl's size to machines and storage.

Nothing here reads a file or a clock. :func:`plan` takes the crawl's shape
(:class:`CrawlShape`) and courtier's own measured per-core figures
(:class:`Figures`, read by :mod:`courtier.ops.figures`) and returns a
:class:`Plan` of plain numbers; :mod:`courtier.cli.plan_command` prints it.

Units: rates per second, sizes in bytes (decimal: 1 TB = 10**12 bytes),
``page_kb`` in decimal kilobytes (1 KB = 1,000 bytes), so that 10**9 pages of
200 KB are 200 TB, the figure the seeds work with. The defaults reproduce
the seeds' worked numbers: 10**9 fetches a day is 11,574 fetches/s on
average, and a peak factor of 2.16 plans for 25,000/s.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from courtier.core.errors import ConfigError

DAY = 86_400.0
DEFAULT_PEAK_FACTOR = 2.16     # 1e9/day x 2.16 / 86,400 s = 25,000 fetches/s planned peak
DEFAULT_COMPRESSION = 4.0      # assumed gzip ratio of HTML in WARC records (set your own)
DEFAULT_REFRESH_SPLIT = "100M:1,rest:30"
DEFAULT_RETENTION_DAYS = 90
DEFAULT_EVENTS_RETENTION = 7 * DAY                # --events-retention (the crawl's default)
DEFAULT_AUDIT_RETENTION = 90 * DAY                # --audit-retention (the crawl's default)
#: bytes of one audit row (fetch_log) with its indexes when the figures file has none:
#: ~145 GB a day at 10^9 fetches (issue #29), an estimate
DEFAULT_AUDIT_BYTES_PER_FETCH = 145.0
DEFAULT_CORE_UTILISATION = 0.75
DEFAULT_CORES_PER_MACHINE = 32
DEFAULT_PG_NODE_TB = 4.0
WARC_RECORD_OVERHEAD = 1_000  # bytes per fetch: request record + response headers, gzipped

_SUFFIX = {"k": 1e3, "m": 1e6, "g": 1e9, "b": 1e9, "t": 1e12}
_COUNT = re.compile(r"^\s*([0-9][0-9_]*(?:\.[0-9]+)?(?:e[0-9]+)?)\s*([kmgbt]?)\s*$", re.I)


def parse_count(text: str, flag: str) -> float:
    """``10e9``, ``1.5B``, ``100M``, ``250k`` or ``1_000`` as a number (errors name ``flag``)."""
    match = _COUNT.match(text)
    if match is None:
        raise ConfigError(f"{flag} {text!r}: expected a count such as 10e9, 1.5B, 100M or 250k")
    return float(match.group(1).replace("_", "")) * _SUFFIX.get(match.group(2).lower(), 1.0)


@dataclass(frozen=True, slots=True)
class RefreshTier:
    """``urls`` known URLs refetched every ``days`` days (``urls`` None: the rest)."""

    urls: float | None
    days: float


def parse_refresh_split(text: str, flag: str = "--refresh-split") -> tuple[RefreshTier, ...]:
    """``COUNT:DAYS[,COUNT:DAYS…][,rest:DAYS]``, e.g. ``100M:1,rest:30``."""
    tiers: list[RefreshTier] = []
    for part in (p.strip() for p in text.split(",")):
        count_text, sep, days_text = part.partition(":")
        if not sep:
            raise ConfigError(f"{flag} {part!r}: expected COUNT:DAYS, e.g. 100M:1 or rest:30")
        try:
            days = float(days_text.strip().removesuffix("d"))
        except ValueError:
            raise ConfigError(f"{flag} {part!r}: DAYS must be a number") from None
        if days <= 0:
            raise ConfigError(f"{flag} {part!r}: DAYS must be > 0")
        if count_text.strip().lower() == "rest":
            if any(t.urls is None for t in tiers):
                raise ConfigError(f"{flag} {text!r}: 'rest' may appear only once")
            tiers.append(RefreshTier(None, days))
        else:
            tiers.append(RefreshTier(parse_count(count_text, flag), days))
    return tuple(tiers)


@dataclass(frozen=True, slots=True)
class Figures:
    """courtier's measured costs (see bench/record_figures.py for how each is measured)."""

    measured_at: str
    source: str
    cpu_seconds_per_page: float
    store_bytes_per_url: float
    store_bytes_per_event: float
    warc_bytes_per_fetch: float
    warc_compression_ratio: float
    peak_rss_mb: float
    #: one database node's write rates (bench/store_bench.py --citus --figures-out: the
    #: Citus cluster's rates over its worker nodes); None: not in the figures file
    commit_results_per_second_per_node: float | None = None
    intake_rows_per_second_per_node: float | None = None
    store_bytes_per_audit_row: float | None = None


@dataclass(frozen=True, slots=True)
class CrawlShape:
    known_urls: float
    fetches_per_day: float
    page_kb: float
    peak_factor: float = DEFAULT_PEAK_FACTOR
    compression: float = DEFAULT_COMPRESSION
    refresh: tuple[RefreshTier, ...] = parse_refresh_split(DEFAULT_REFRESH_SPLIT)
    retention_days: float = DEFAULT_RETENTION_DAYS
    events_retention: float = DEFAULT_EVENTS_RETENTION   # seconds (0: kept for ever)
    audit_retention: float = DEFAULT_AUDIT_RETENTION     # seconds (0: kept for ever)
    core_utilisation: float = DEFAULT_CORE_UTILISATION
    cores_per_machine: int = DEFAULT_CORES_PER_MACHINE
    pg_node_tb: float = DEFAULT_PG_NODE_TB
    #: a node's commit results/s and intake rows/s given on the command line (None: the
    #: figures file's)
    commit_results_per_second: float | None = None
    intake_rows_per_second: float | None = None

    def validate(self) -> CrawlShape:
        for flag, value in (("--known-urls", self.known_urls),
                            ("--fetches-per-day", self.fetches_per_day),
                            ("--page-kb", self.page_kb), ("--compression", self.compression),
                            ("--retention-days", self.retention_days),
                            ("--pg-node-tb", self.pg_node_tb)):
            if not value > 0:
                raise ConfigError(f"{flag} must be > 0")
        for flag, rate in (("--commit-results-per-second", self.commit_results_per_second),
                           ("--intake-rows-per-second", self.intake_rows_per_second)):
            if rate is not None and not rate > 0:
                raise ConfigError(f"{flag} must be > 0")
        for flag, value in (("--events-retention", self.events_retention),
                            ("--audit-retention", self.audit_retention)):
            if not value > 0:
                raise ConfigError(f"{flag} must be > 0 seconds (a plan for a table kept "
                                  "for ever has no size)")
        if self.peak_factor < 1:
            raise ConfigError("--peak-factor must be >= 1 (the peak is at least the average)")
        if not 0 < self.core_utilisation <= 1:
            raise ConfigError("--core-utilisation must be in (0, 1]")
        if self.cores_per_machine < 1:
            raise ConfigError("--cores-per-machine must be >= 1")
        named = sum(t.urls or 0.0 for t in self.refresh)
        if named > self.known_urls:
            raise ConfigError(f"--refresh-split names {named:,.0f} URLs, more than "
                              f"--known-urls {self.known_urls:,.0f}")
        return self


@dataclass(frozen=True, slots=True)
class TierPlan:
    label: str
    urls: float
    days: float
    fetches_per_day: float


@dataclass(frozen=True, slots=True)
class Plan:
    average_fetches_per_second: float
    peak_fetches_per_second: float
    average_bandwidth_bytes_per_second: float
    peak_bandwidth_bytes_per_second: float
    body_bytes_per_day: float
    warc_bytes_per_day: float
    warc_bytes_retained: float
    url_store_bytes: float
    event_bytes_per_day: float
    event_bytes_retained: float
    audit_bytes_per_day: float
    audit_bytes_retained: float
    tiers: tuple[TierPlan, ...]
    refresh_fetches_per_day: float
    discovery_fetches_per_day: float      # negative: the refresh split does not fit
    rest_days_that_fit: float | None      # shortest 'rest' cycle within budget (None: none fits)
    cores: int
    workers: int
    machines: int
    worker_memory_mb: float
    commits_per_second_peak: float          # one commit result a fetch
    new_urls_per_second_peak: float         # one intake row a fetch of a new URL
    commit_results_per_second_per_node: float
    intake_rows_per_second_per_node: float
    store_rates_measured: bool              # both from the figures file (no flag)
    pg_nodes_for_writes: int
    pg_nodes_for_storage: int
    pg_nodes: int


def _tiers(shape: CrawlShape) -> tuple[tuple[TierPlan, ...], float | None]:
    named = sum(t.urls or 0.0 for t in shape.refresh)
    out: list[TierPlan] = []
    rest_urls = 0.0
    for tier in shape.refresh:
        urls = shape.known_urls - named if tier.urls is None else tier.urls
        label = f"rest ({urls:,.0f} URLs)" if tier.urls is None else f"{urls:,.0f} URLs"
        if tier.urls is None:
            rest_urls = urls
        out.append(TierPlan(label, urls, tier.days, urls / tier.days))
    fits: float | None = None
    if rest_urls:
        others = sum(planned.fetches_per_day for planned, tier in zip(out, shape.refresh,
                                                                      strict=True)
                     if tier.urls is not None)
        room = shape.fetches_per_day - others
        fits = rest_urls / room if room > 0 else None
    return tuple(out), fits


def node_write_rates(shape: CrawlShape, figures: Figures) -> tuple[float, float]:
    """A database node's commit results/s and intake rows/s: the command line's, else
    the figures file's; a ConfigError when neither has one (no assumed rate)."""
    commit = shape.commit_results_per_second or figures.commit_results_per_second_per_node
    intake = shape.intake_rows_per_second or figures.intake_rows_per_second_per_node
    if commit is None or intake is None:
        missing = " or ".join(name for name, rate in (
            ("commit_results_per_second_per_node", commit),
            ("intake_rows_per_second_per_node", intake)) if rate is None)
        raise ConfigError(f"the figures file has no {missing}: measure them with "
                          "bench/store_bench.py --citus --figures-out FILE, or give "
                          "--commit-results-per-second and --intake-rows-per-second")
    return commit, intake


def plan(shape: CrawlShape, figures: Figures) -> Plan:
    """The capacity needed for ``shape`` at the measured costs in ``figures``."""
    shape.validate()
    average = shape.fetches_per_day / DAY
    peak = average * shape.peak_factor
    page_bytes = shape.page_kb * 1_000
    body_day = shape.fetches_per_day * page_bytes
    # WARC: the bodies at --compression plus the request record and headers of each fetch
    warc_day = shape.fetches_per_day * (page_bytes / shape.compression + WARC_RECORD_OVERHEAD)
    tiers, rest_fits = _tiers(shape)
    refresh = sum(t.fetches_per_day for t in tiers)
    cores = math.ceil(peak * figures.cpu_seconds_per_page / shape.core_utilisation)
    machines = math.ceil(cores / shape.cores_per_machine)
    discovery = shape.fetches_per_day - refresh
    new_urls_peak = max(0.0, discovery) / DAY * shape.peak_factor
    commit_rate, intake_rate = node_write_rates(shape, figures)
    url_bytes = shape.known_urls * figures.store_bytes_per_url
    event_day = shape.fetches_per_day * figures.store_bytes_per_event
    # the outbox and the audit log are kept for their retentions (both are day partitions,
    # plus the day being written and the two made ahead, which are empty)
    event_kept = event_day * (shape.events_retention / DAY + 1)
    audit_day = shape.fetches_per_day * (figures.store_bytes_per_audit_row
                                         or DEFAULT_AUDIT_BYTES_PER_FETCH)
    audit_kept = audit_day * (shape.audit_retention / DAY + 1)
    # a node's time shared between the commits and the intake it holds: each at its
    # measured rate (Citus spreads both over the nodes by shard)
    for_writes = math.ceil(peak / commit_rate + new_urls_peak / intake_rate)
    for_storage = math.ceil((url_bytes + event_kept + audit_kept) / (shape.pg_node_tb * 1e12))
    return Plan(
        average_fetches_per_second=average,
        peak_fetches_per_second=peak,
        average_bandwidth_bytes_per_second=average * page_bytes,
        peak_bandwidth_bytes_per_second=peak * page_bytes,
        body_bytes_per_day=body_day,
        warc_bytes_per_day=warc_day,
        warc_bytes_retained=warc_day * shape.retention_days,
        url_store_bytes=url_bytes,
        event_bytes_per_day=event_day,
        event_bytes_retained=event_kept,
        audit_bytes_per_day=audit_day,
        audit_bytes_retained=audit_kept,
        tiers=tiers,
        refresh_fetches_per_day=refresh,
        discovery_fetches_per_day=discovery,
        rest_days_that_fit=rest_fits,
        cores=cores,
        workers=cores,
        machines=machines,
        worker_memory_mb=figures.peak_rss_mb,
        commits_per_second_peak=peak,
        new_urls_per_second_peak=new_urls_peak,
        commit_results_per_second_per_node=commit_rate,
        intake_rows_per_second_per_node=intake_rate,
        store_rates_measured=(shape.commit_results_per_second is None
                              and shape.intake_rows_per_second is None),
        pg_nodes_for_writes=for_writes,
        pg_nodes_for_storage=for_storage,
        pg_nodes=max(for_writes, for_storage, 1),
    )

