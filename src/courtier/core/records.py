"""Records shared by the store, the frontier, the cluster and the worker: what a URL row,
a lease's result, a host's durable state, an outbox event, an archive segment, and a
worker's and a shard lease's row as the cluster planning reads them look like.

A neutral module, so that neither side imports the other for its types: the frontier
reads :class:`DueUrl` and :class:`HostRecord` without loading the store package, and
the store reads :data:`DAY` without loading the frontier; the store hands
:class:`WorkerView` and :class:`LeaseView` to the cluster planning
(:mod:`courtier.cluster.membership`) without knowing the planning. :mod:`courtier.store.base`
re-exports every name for the Store protocol's callers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import orjson

from courtier.core.errors import StoreError
from courtier.core.outcome import Outcome

#: seconds in one budget day (the daily budget's and max-pages-per-day's window)
DAY = 24 * 3600.0

#: a URL overdue by more than this outranks every other (the minimum-refresh guarantee;
#: ``load_due``'s ``overdue_before``); the frontier ranks by the same constant
OVERDUE_AFTER = 7 * 24 * 3600.0


class UrlState(IntEnum):
    QUEUED = 0     # known, waiting for next_fetch_at
    SCHEDULED = 1  # loaded into an owner's in-memory frontier
    RETIRED = 2    # never fetched again (out of budget, permanently gone…)


@dataclass(frozen=True, slots=True)
class NewUrl:
    """A discovered URL for intake. ``url_key`` (16 bytes) is the primary key."""

    url_key: bytes
    url: str
    host_key: str
    shard: int
    depth: int
    priority: int
    next_fetch_at: float
    discovered_at: float
    redirect_hops: int = 0
    sitemap_changefreq: str | None = None   # hints from a sitemap entry (recrawl prior)
    sitemap_lastmod: float | None = None
    #: JSON list of the redirects that led here when first discovered, oldest first:
    #: ``[{"url": …, "status": 301}, …]`` (events/redirects.py); None: reached directly
    redirect_chain: str | None = None


@dataclass(frozen=True, slots=True)
class DueUrl:
    """A URL row handed to the frontier by :meth:`Store.load_due`."""

    url_key: bytes
    url: str
    host_key: str
    shard: int
    depth: int
    priority: int
    version: int
    next_fetch_at: float
    redirect_hops: int = 0
    etag: str | None = None
    last_modified: str | None = None
    failure_count: int = 0
    payload_digest: str | None = None    # of the last fetch (change detection)
    change_stats: str | None = None      # JSON of frontier.recrawl.ChangeStats
    last_fetch_at: float | None = None
    warc_file: str | None = None         # the last response record (304 revisits refer to it)
    simhash: int | None = None           # unsigned 64-bit fingerprint of the last fetch
    sitemap_changefreq: str | None = None
    sitemap_lastmod: float | None = None
    redirect_chain: str | None = None     # see NewUrl.redirect_chain
    #: the stored value (set from outside, or derived at its first fetch; None: none
    #: yet), read with the row so that planning needs no look-up of its own
    value: float | None = None


@dataclass(slots=True)
class FetchCommit:
    """The result of one lease, written by :meth:`Store.commit`.

    ``version`` and ``epoch`` are those the lease carried. ``next_fetch_at``
    None retires the URL. ``event`` is the JSON-able outbox payload; the store
    adds url_key, url, version (the new one) and outcome to it.
    """

    url_key: bytes
    url: str
    host_key: str
    shard: int
    version: int
    epoch: int
    outcome: Outcome
    fetched_at: float
    next_fetch_at: float | None
    status: int | None = None
    interval: float = 0.0
    etag: str | None = None
    last_modified: str | None = None
    content_type: str | None = None
    payload_digest: str | None = None
    content_length: int | None = None
    warc_file: str | None = None
    warc_offset: int | None = None
    warc_length: int | None = None
    redirect_to: str | None = None
    failure_count: int = 0
    error_kind: str | None = None
    robots_digest: str | None = None
    delay_applied: float | None = None
    title: str | None = None
    simhash: int | None = None           # unsigned 64-bit SimHash of the visible text
    near_dup_of: str | None = None       # url_key hex of a page within Hamming distance 3
    change_stats: str | None = None      # JSON of frontier.recrawl.ChangeStats after this visit
    priority: int | None = None          # new priority of the row (None keeps it)
    value: float | None = None           # value to store (None keeps it; frontier/value.py)
    tier: str | None = None              # refresh tier the plan used (None keeps it)
    new_urls: Sequence[NewUrl] = ()
    event: dict[str, Any] = field(default_factory=dict)

    def event_json(self) -> str:
        """The outbox JSON: ``event`` plus url_key (hex), url, version (the new one) and
        outcome. Raises StoreError when ``event`` is not JSON-serialisable.

        orjson writes it (several times the standard encoder's speed, which was ~3 % of a
        crawl's CPU; UTF-8 text without ``\\u`` escapes; NaN and infinities become null).
        What orjson refuses (a lone surrogate, an integer beyond 64 bits) goes to the
        standard encoder, which escapes surrogates and raises for the rest."""
        payload = dict(self.event)
        payload.update(url_key=self.url_key.hex(), url=self.url, version=self.version + 1,
                       outcome=str(self.outcome))
        try:
            return orjson.dumps(payload).decode()
        except TypeError:
            pass
        try:
            return json.dumps(payload, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"event payload of {self.url} is not JSON-serialisable: {exc}") from exc


@dataclass(frozen=True, slots=True)
class CommitResult:
    applied: int        # commits whose version/epoch matched
    stale: int          # commits ignored (repeated, or a stale version/epoch)
    new_urls: int       # discovered URLs that were not already known


@dataclass(slots=True)
class HostStatsDelta:
    """Counter increments for one host, applied in the same transaction as a commit."""

    host_key: str
    shard: int
    fetched: int = 0
    errors: int = 0
    bytes: int = 0
    ttfb_sum: float = 0.0
    status_2xx: int = 0
    status_3xx: int = 0
    status_4xx: int = 0
    status_5xx: int = 0


@dataclass(slots=True)
class HostRecord:
    """The durable part of a host's state (robots copy, policy, counters)."""

    host_key: str
    shard: int
    robots_status: int | None = None     # HTTP status of the last robots fetch, 0 = network error
    robots_body: bytes | None = None     # body of the last 2xx robots fetch (capped)
    robots_fetched_at: float | None = None
    robots_expires_at: float | None = None
    robots_digest: str | None = None
    crawl_delay: float | None = None
    backoff_until: float | None = None
    policy_delay: float | None = None
    policy_max_in_flight: int | None = None
    policy_max_pages: int | None = None
    blocked: bool = False
    fetched: int = 0
    errors: int = 0
    bytes: int = 0
    ttfb_sum: float = 0.0
    #: an http host that redirects its URLs to https: the https host key they go to
    https_upgrade: str | None = None
    #: why robots.txt is unreachable: the last failure's kind ("tls_unknown_issuer",
    #: "dns", "http_503", …) and message, when this run of failures began and the last
    #: one; all None while robots.txt answers (written by ``save_robots``)
    robots_error_kind: str | None = None
    robots_error: str | None = None
    robots_error_since: float | None = None
    robots_error_at: float | None = None


#: the :class:`DayCount` key of the crawl-wide ``--daily-budget``
DAILY_BUDGET_KEY = "*"

#: where a payload was first archived: (warc_file, offset, url, fetched_at)
PayloadLocation = tuple[str, int, str, float]


@dataclass(frozen=True, slots=True)
class HostTierRecord:
    """A host's freshness override (``policy set HOST --tier/--min-interval/--max-interval/
    --value``); None fields are not overridden. See ``frontier/tiers.py``."""

    host_key: str
    tier: str | None = None
    min_interval: float | None = None
    max_interval: float | None = None
    value_factor: float | None = None

    def is_empty(self) -> bool:
        return (self.tier is None and self.min_interval is None and self.max_interval is None
                and self.value_factor is None)


#: ``tier_counts`` key of rows no plan has assigned a tier yet (never fetched)
UNPLANNED_TIER = "unplanned"


@dataclass(frozen=True, slots=True)
class DayCount:
    """Page fetches counted in one 24 h budget window.

    ``key`` is :data:`DAILY_BUDGET_KEY` for the crawl-wide daily budget, else a
    host_key (its max-pages-per-day policy). ``day_start`` is the POSIX time the
    window began; ``used`` the fetches started in it so far.
    """

    key: str
    day_start: float
    used: int


@dataclass(frozen=True, slots=True)
class Event:
    """One outbox row. ``id`` increases; consumers read with ``after=id``. ``shard`` and
    ``shard_pos`` place it in its shard's commit order (``core/shard_cursor.py``); -1 and 0
    where a store does not say (an event built outside a store)."""

    id: int
    url_key: bytes
    version: int
    created_at: float
    payload: dict[str, Any]
    shard: int = -1
    shard_pos: int = 0


@dataclass(frozen=True, slots=True)
class ReparseEvent:
    """An outbox event for a capture re-parsed from the archive (``courtier reparse``).

    ``(url_key, version)`` names the capture (the fetch event it re-parses);
    ``parser_version`` (>= 1) the parser that produced ``payload``.
    """

    url_key: bytes
    version: int
    parser_version: int
    payload: dict[str, Any]

    def payload_json(self) -> str:
        """``payload`` as compact JSON text (the stores' ``events.payload``); StoreError
        when it is not JSON-serialisable (NaN and infinities included)."""
        try:
            return json.dumps(self.payload, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"reparse event payload is not JSON-serialisable: {exc}") from exc


#: states of an archive segment, in order (LOST: its spool vanished before upload)
SEGMENT_STATES = ("spooled", "uploaded", "verified", "lost")


@dataclass(frozen=True, slots=True)
class SegmentRecord:
    """One WARC segment of an object-store archive (see ``archive/spool.py``)."""

    name: str           # path relative to the archive root, "<owner>/<file>.warc.gz"
    owner: str          # the writer's prefix
    state: str          # one of SEGMENT_STATES
    size: int
    created_at: float
    updated_at: float


# ---- cluster rows, as the shard planning reads them ---------------------------------------


@dataclass(frozen=True, slots=True)
class WorkerView:
    """A ``workers`` row: a worker is live while ``heartbeat_at + ttl > now``."""

    worker_id: str
    weight: float
    heartbeat_at: float


@dataclass(frozen=True, slots=True)
class LeaseView:
    """A ``shard_lease`` row; ``owner`` is None for a shard nobody has held."""

    shard: int
    owner: str | None
    epoch: int
    expires_at: float
