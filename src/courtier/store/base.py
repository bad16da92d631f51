"""The Store contract.

Every store (SQLite now, PostgreSQL for scale-out) implements :class:`Store`
and passes the same contract suite in ``tests/contract``. Callers must not
assume anything beyond what these docstrings promise.

Row life cycle of a URL::

    add_urls ──► QUEUED ──load_due──► SCHEDULED (held by the shard owner's frontier)
                   ▲                      │ commit (version v → v+1)
                   └──────────────────────┘   next_fetch_at set, or RETIRED
    reset_scheduled (new owner / restart): SCHEDULED ──► QUEUED
    release_shards / release (work given back):  SCHEDULED ──► QUEUED

The unique url_key is the truth about "seen". ``version`` counts completed
fetch cycles; a lease carries the version it saw, and a commit is applied
only if the row still has that version and the shard epoch is current, so a
repeated or stale commit changes nothing and emits no second event.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Protocol

import orjson

from courtier.errors import StoreError
from courtier.outcome import Outcome
from courtier.store.cluster import ClusterStore
from courtier.store.event_counts import EventCounts

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
    """One outbox row. ``id`` increases; consumers read with ``after=id``."""

    id: int
    url_key: bytes
    version: int
    created_at: float
    payload: dict[str, Any]


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


class Store(ClusterStore, Protocol):
    """Durable crawl state. All methods are coroutines; each is atomic.

    On failure a method raises :class:`courtier.errors.StoreError` and has
    applied nothing. Callers retry later; the store never loses a row it
    acknowledged. The cluster half of the contract (membership, leases, the shared
    daily budget, host clocks, IP slots, scope rules) is in
    :class:`courtier.store.cluster.ClusterStore`.
    """

    async def open(self) -> None:
        """Create or migrate the schema (numbered migrations, idempotent)."""

    async def close(self) -> None:
        """Flush and release resources. Idempotent."""

    async def add_urls(self, urls: Sequence[NewUrl]) -> int:
        """Insert URLs not yet known (``ON CONFLICT DO NOTHING``); return how many were new.

        A known url_key is left untouched (its state, version and schedule are kept).
        """

    async def reset_scheduled(self, shards: Sequence[int],
                              epochs: Mapping[int, int] | None = None) -> int:
        """Return SCHEDULED rows of these shards to QUEUED (after a restart/takeover).

        With ``epochs``, only shards whose stored epoch equals ``epochs[shard]`` (shards
        absent from it are skipped): a deposed owner's reset changes nothing."""

    async def release(self, items: Sequence[tuple[bytes, float]],
                      epochs: Mapping[int, int] | None = None) -> int:
        """Return SCHEDULED rows to QUEUED with a new ``next_fetch_at`` (no version bump, no
        event): work the frontier gave back unfetched (back-off, shutdown). Returns rows changed.

        With ``epochs``, rows of a shard whose stored epoch differs from ``epochs[shard]``
        (or that is absent from it) are left alone: a deposed owner gives back nothing.
        """

    async def load_due(
        self,
        shards: Sequence[int],
        now: float,
        limit: int,
        per_host_limit: int,
        skip_hosts: Collection[str] = (),
        epochs: Mapping[int, int] | None = None,
    ) -> list[DueUrl]:
        """Mark up to ``limit`` QUEUED rows with ``next_fetch_at <= now`` SCHEDULED and return them.

        With ``epochs``, the refill covers only the shards whose stored epoch equals
        ``epochs[shard]``, checked in the same transaction: a deposed owner loads nothing
        of a shard taken over (or released) since.

        A two-level selection, host first, like the frontier. Let Q(h) be the
        QUEUED rows of host h in ``shards``, D(h) those with ``next_fetch_at <=
        now``, and ``overdue_before = now - OVERDUE_AFTER`` (the minimum-refresh
        guarantee). Hosts with D(h) non-empty and not in ``skip_hosts`` (their
        in-memory window is full) are ranked by: overdue first (``min
        next_fetch_at over Q(h) < overdue_before``), then ``max priority over
        Q(h)`` DESC (due or not), then ``min next_fetch_at over Q(h)``, then
        host_key. Rows of a host (over D(h)) are ranked by: overdue first, then
        priority DESC, next_fetch_at, depth, url_key. Walking the hosts in order,
        each gives its first ``min(per_host_limit, limit - taken)`` rows, until
        ``limit`` rows are taken or the hosts run out; the rows are returned in
        that walk order.

        Stores keep a per-shard host queue (next due time, best priority) exact
        on every write, so the cost grows with the rows returned, not with the
        backlog of due or known rows.
        """

    async def next_due_at(self, shards: Sequence[int], pending_only: bool = False) -> float | None:
        """Earliest ``next_fetch_at`` among QUEUED rows of these shards (None if none).

        ``pending_only`` considers only rows whose current cycle is unfinished: never
        fetched (version 0) or retrying after a failure (failure_count > 0) — what a
        one-shot crawl waits for, unlike recrawls.
        """

    async def pending_counts(self, shards: Sequence[int]) -> tuple[int, int]:
        """QUEUED rows of these shards whose current cycle is unfinished, as
        ``(never_fetched, retrying)``: version 0, and version > 0 with
        failure_count > 0 (the rows ``next_due_at(pending_only=True)`` looks at).
        Rows waiting only for their next recrawl are not counted. One scan of the
        shards' QUEUED rows; meant for a crawl's end, not the hot path."""

    async def commit(
        self, commits: Sequence[FetchCommit], host_stats: Sequence[HostStatsDelta] = ()
    ) -> CommitResult:
        """Apply fetch results, their discovered URLs, outbox events and host counters at once.

        For each commit: applied only if the row's version equals
        ``commit.version`` and the shard's current epoch equals
        ``commit.epoch``; then version becomes ``version + 1``, state becomes
        QUEUED (or RETIRED when ``next_fetch_at`` is None) and one event
        ``(url_key, version + 1)`` is appended. Otherwise nothing of that
        commit is applied (its new_urls are still inserted: discovery is
        idempotent). The payload index (digest → first WARC location) is
        filled from applied commits.
        """

    async def get_url(self, url_key: bytes) -> dict[str, Any] | None:
        """The URL row as a dict (column name → value), or None."""

    async def load_host(self, host_key: str) -> HostRecord | None: ...

    async def save_robots(self, record: HostRecord) -> None:
        """Upsert the robots fields (status, body, fetched/expires, digest, crawl_delay).

        A ``robots_body`` of None keeps the stored body (the last good copy)."""

    async def set_policy(
        self,
        host_key: str,
        shard: int,
        delay: float | None,
        max_in_flight: int | None,
        max_pages: int | None,
        blocked: bool,
    ) -> None:
        """Upsert a host's policy override; None means "use the default"."""

    async def save_backoff(self, host_key: str, shard: int, until: float) -> None:
        """Record that a host pauses until ``until`` (429/5xx/errors), so a restart or a
        new shard owner keeps the pause."""

    async def load_day_counts(self, keys: Collection[str]) -> dict[str, DayCount]:
        """The stored counts of these keys (written by :meth:`reserve_day_counts`); keys
        never counted are absent."""

    async def policies_changed(self, since: float) -> list[HostRecord]:
        """Hosts whose policy override was set or cleared after ``since`` (store clock),
        so a running crawl applies overrides made by another process within a second."""

    async def fetch_log(
        self, after: int = 0, limit: int = 1000, url_key: bytes | None = None
    ) -> list[dict[str, Any]]:
        """The audit trail: one row per applied commit (id, url_key, version, fetched_at,
        status, outcome, robots_digest, delay_applied, error_kind), in id order, with
        ``id > after``; only that URL's rows when ``url_key`` is given."""

    async def payload_location(self, digest: str) -> PayloadLocation | None:
        """First (warc_file, offset, url, fetched_at) stored for this payload digest."""

    async def payload_locations(self, digests: Sequence[str]) -> dict[str, PayloadLocation]:
        """:meth:`payload_location` of many digests in one query: only the digests found are
        keys; a digest may be given more than once; no digests ask nothing of the database."""

    async def read_events(self, after: int, limit: int) -> list[Event]:
        """Outbox events with ``id > after`` in id order."""

    async def event_counts(self) -> EventCounts:
        """The outbox's tallies (events, outcomes, status mix) as kept at write time: equal
        to :meth:`EventCounts.of_payloads` over every event (``store/event_counts.py``)."""

    async def save_segment(self, name: str, owner: str, state: str, size: int) -> None:
        """Upsert a segment's state (one of :data:`SEGMENT_STATES`) and size, stamped with
        the store clock; ``created_at`` is kept from the first call. An unknown state
        raises :class:`StoreError`."""

    async def segments(self, owner: str | None = None,
                       states: Collection[str] = ()) -> list[SegmentRecord]:
        """Segments of ``owner`` (all owners when None) in ``states`` (all when empty),
        ordered by name."""

    async def requeue_archive_file(self, warc_file: str, now: float) -> int:
        """A WARC file was lost before it became durable remotely: every URL row whose last
        record is in it goes back to QUEUED, due ``now``, with its WARC location, payload
        digest and validators (etag, last-modified) cleared so the refetch is a full GET;
        the payload index forgets entries in that file. No version bump, no event.
        Returns the rows requeued."""

    async def add_reparse_events(self, events: Sequence[ReparseEvent]) -> int:
        """Append re-parse events to the outbox, at most one per
        ``(url_key, version, parser_version)`` ever: a key already present (from this
        call or any earlier one) is skipped. Fetch events (of :meth:`commit`) never
        collide with them. Returns how many were appended; their ``Event.version`` is
        the capture's version and their payload is stored as given."""

    async def seed_urls(self, limit: int = 100_000) -> list[str]:
        """URLs at depth 0 (the seeds of every run so far); they define the crawl's scope."""

    async def due_within(self, shards: Sequence[int], until: float) -> int:
        """QUEUED rows of these shards with ``next_fetch_at < until``: the planned fetch load
        (compare with a daily budget)."""

    async def set_values(self, items: Sequence[tuple[bytes, float | None]]) -> int:
        """Set the value (``frontier/value.py``) of known URLs; None clears it (the next
        fetch derives one). Unknown url_keys are skipped; no version bump, no event, the
        schedule is unchanged. Returns the rows changed."""

    async def url_values(self, url_keys: Collection[bytes]) -> dict[bytes, float]:
        """Stored values of these URLs; keys unknown or without a value are absent."""

    async def set_host_tier(self, record: HostTierRecord) -> None:
        """Upsert a host's freshness override; an empty record (all None) removes it."""

    async def host_tiers(self, host_keys: Collection[str]) -> dict[str, HostTierRecord]:
        """The overrides of these hosts; hosts without one are absent."""

    async def tier_counts(self, shards: Sequence[int], until: float) -> dict[str, int]:
        """QUEUED rows of these shards with ``next_fetch_at < until``, by refresh tier
        (``urls.tier``; :data:`UNPLANNED_TIER` for rows no plan has assigned one): the
        planned load of each tier. Tiers without such rows are absent."""

    async def counts(self) -> dict[str, int]:
        """Crawl-wide figures: urls, queued, scheduled, retired, fetched, events, hosts."""
