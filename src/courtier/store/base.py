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
    read_due: the rows load_due would take, left QUEUED (the refill without marking:
    the owner remembers what it holds; docs/scale-out.md, "The refill that writes nothing")

The unique url_key is the truth about "seen". ``version`` counts completed
fetch cycles; a lease carries the version it saw, and a commit is applied
only if the row still has that version and the shard epoch is current, so a
repeated or stale commit changes nothing and emits no second event.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from courtier.core.records import (
    DAILY_BUDGET_KEY,
    OVERDUE_AFTER,
    SEGMENT_STATES,
    UNPLANNED_TIER,
    CommitResult,
    DayCount,
    DueUrl,
    Event,
    FetchCommit,
    HostRecord,
    HostStatsDelta,
    HostTierRecord,
    LeaseView,
    NewUrl,
    PayloadLocation,
    ReparseEvent,
    SegmentRecord,
    UrlState,
    WorkerView,
)
from courtier.core.shard_cursor import ShardCursor, ShardPage
from courtier.store.cluster import ClusterStore
from courtier.store.event_counts import EventCounts

#: the record types live in :mod:`courtier.core.records`; re-exported for the protocol's callers
__all__ = [
    "DAILY_BUDGET_KEY",
    "OVERDUE_AFTER",
    "SEGMENT_STATES",
    "UNPLACED",
    "UNPLANNED_TIER",
    "CommitResult",
    "DayCount",
    "DueUrl",
    "Event",
    "FetchCommit",
    "HostRecord",
    "HostStatsDelta",
    "HostTierRecord",
    "LeaseView",
    "NewUrl",
    "PayloadLocation",
    "ReparseEvent",
    "SegmentRecord",
    "ShardCursor",
    "ShardPage",
    "Store",
    "UrlState",
    "WorkerView",
]


#: the position :meth:`Store.events_by_url` gives an event not yet placed
UNPLACED = 2**63 - 1


class Store(ClusterStore, Protocol):
    """Durable crawl state. All methods are coroutines; each is atomic.

    On failure a method raises :class:`courtier.core.errors.StoreError` and has
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

    async def postpone(self, items: Sequence[tuple[bytes, int, float]],
                       epochs: Mapping[int, int] | None = None) -> int:
        """Move QUEUED rows, given as ``(url_key, version, at)``, to ``next_fetch_at = at``
        (no version bump, no event): work a worker read with :meth:`read_due` and gives
        back unfetched to be due later (a host in a long back-off, its daily budget spent,
        a WARC write failing). A row no longer QUEUED at that version (committed since, or
        given back already) is left alone. Returns rows changed.

        With ``epochs``, rows of a shard whose stored epoch differs from ``epochs[shard]``
        (or that is absent from it) are left alone, as for :meth:`release`.
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

    async def read_due(
        self,
        shards: Sequence[int],
        now: float,
        limit: int,
        per_host_limit: int,
        skip_hosts: Collection[str] = (),
        epochs: Mapping[int, int] | None = None,
    ) -> list[DueUrl]:
        """The rows :meth:`load_due` would mark, in the same order, and nothing written.

        The refill without marking (docs/scale-out.md, "The refill"): the rows stay
        QUEUED, no host-queue row changes and no lock outlives the call; the shard's
        lease is the guard against a second reader, and the caller remembers what it
        holds (it passes those hosts as ``skip_hosts``). The selection is exactly
        :meth:`load_due`'s on the same state (and, with ``epochs``, the same fence), so
        calling it twice returns the same rows. Stores keep each host's best level and
        the due times of that level and of its others in its host-queue row, so a host
        whose best level alone is due costs one index range of the rows returned.
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
        """Upsert the robots fields (status, body, fetched/expires, digest, crawl_delay,
        and the failure: ``robots_error_kind``/``robots_error``/``robots_error_since``/
        ``robots_error_at``, all None while robots.txt answers, which clears them).

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

    async def save_https_upgrade(self, host_key: str, shard: int,
                                 https_host_key: str | None) -> None:
        """Record that the http host ``host_key`` redirects its URLs to the same URLs under
        ``https_host_key`` (None: it no longer does), so a restart or a new shard owner
        settles them without a request too (``load_host`` returns it)."""

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
        """Outbox events with ``id > after`` in id order.

        Raises :class:`~courtier.core.errors.EventsPruned` when ``after`` is below
        :meth:`events_pruned_through`: some events after it were removed, and reading on
        would skip them silently."""

    async def read_events_by_shard(self, cursor: ShardCursor, limit: int) -> ShardPage:
        """Outbox events above ``cursor``, shard by shard, at most ``limit``: each shard's
        events in ``shard_pos`` order (its commit order), the shards in ascending order, and
        the cursor to read on from. Nothing is ever skipped: an event not yet committed
        takes a position above every one already readable in its shard, so a reader that
        passes a position never misses an event at or below it; an event at or below
        ``cursor`` is never returned again. A shard absent from ``cursor`` is read from its
        first event. When several shards are behind the limit is shared among them
        (``store/shard_reads.py``). These positions are assigned at commit: no sequencer
        runs (PostgreSQL's ``read_events`` order needs one)."""

    async def shard_cursor_at(self, position: int) -> ShardCursor:
        """The per-shard cursor of a reader that has read every event with crawl-wide
        position (``read_events``) at or below ``position``: in each shard, the highest
        ``shard_pos`` at or below which every event has a position at or below
        ``position`` (an event not yet placed counts as above it). Events above it in a
        shard may have been read already (positions are handed out in id order, commits
        may land out of it): a reader moving to this cursor reads them again, it never
        skips one. For converting an integer cursor (``courtier index``'s old index files,
        docs/events.md); no sequencer runs. Raises
        :class:`~courtier.core.errors.EventsPruned` as :meth:`read_events` does."""

    async def events_by_url(self, after: bytes | None, urls: int) -> list[Event]:
        """Every kept event of the next ``urls`` URLs (by url_key) after ``after`` (None: from
        the first), ordered by url_key then position: a URL's events all come in one call,
        so a reader of the whole outbox (``courtier archive gc``) holds one page of URLs at
        a time. An event not yet placed (PostgreSQL: its transaction committed after the
        last sequencer run) has position :data:`UNPLACED`, above every placed one. Each
        event carries its ``shard`` and ``shard_pos``."""

    async def warc_files_in_use(self, names: Collection[str]) -> set[str]:
        """Those of ``names`` that some URL row still points at (its current WARC record)."""

    async def register_consumer(self, name: str) -> int:
        """Register the consumer ``name`` unless it is registered; return its position (the
        id of the last event it consumed). A new name starts at
        :meth:`events_pruned_through` (0 while nothing was pruned): the oldest position
        still readable. Registering again keeps the position."""

    async def consumer_position(self, name: str) -> int | None:
        """The registered position of consumer ``name``; None if it is not registered."""

    async def advance_consumer(self, name: str, position: int) -> int:
        """Move consumer ``name`` forward to ``position`` (registering it if new) and
        return its position after the call: never backwards, so a repeated or late call
        changes nothing."""

    async def consumers(self) -> dict[str, int]:
        """Every registered consumer with a crawl-wide position, and its position."""

    async def register_shard_consumer(self, name: str) -> ShardCursor:
        """Register ``name`` as a per-shard consumer unless it is registered; return its
        cursor (per shard, the last position consumed). A new one starts, in each shard,
        at the highest position the retention removed there (nothing: the shard's first
        event). Registering again keeps the cursor. ConfigError when ``name`` is
        registered with a crawl-wide position (``store/consumer_kinds.py``)."""

    async def shard_consumer_position(self, name: str) -> ShardCursor | None:
        """The cursor of per-shard consumer ``name``; None if it is not one."""

    async def advance_shard_consumer(self, name: str, cursor: ShardCursor) -> ShardCursor:
        """Move per-shard consumer ``name`` forward to ``cursor`` in each shard it names
        (registering it if new) and return its cursor after the call: never backwards in
        any shard, so a repeated or late call changes nothing."""

    async def shard_consumers(self) -> dict[str, ShardCursor]:
        """Every per-shard consumer and its cursor, by name."""

    async def forget_consumer(self, name: str) -> bool:
        """Unregister ``name`` (a consumer gone for good, which would hold the outbox's
        retention back for ever), of either kind; True if it was registered."""

    async def event_counts(self) -> EventCounts:
        """The outbox's tallies (events, outcomes, status mix) as kept at write time: equal
        to :meth:`EventCounts.of_payloads` over every event ever appended, the pruned ones
        included (``store/event_counts.py``): crawl totals, not the outbox's size."""

    async def events_pruned_through(self) -> int:
        """The highest position removed by :meth:`prune_events` (0: nothing was removed).
        Every event with a higher position that was ever readable still is."""

    async def prune_events(self, before: float, limit: int) -> int:
        """Remove outbox events created before ``before`` (the store's event time) whose
        position is at or below every registered consumer's position, and whose
        ``shard_pos`` every per-shard consumer has read in its shard, oldest first, about
        ``limit`` at most (a bound on one call's cost); return how many were removed (for
        a whole time partition, PostgreSQL's estimate). An event is never removed before
        its position is assigned, nor above the lowest registered position, so a
        registered consumer never misses one; :meth:`events_pruned_through` rises to the
        highest position removed. Re-parse events lose their "at most once ever" key with
        the event: a capture whose re-parse event was removed may be re-parsed again.

        While no crawl-wide consumer is registered the removal works by shard alone
        (docs/scale-out.md, "By shard alone"): an event held in one shard holds back no
        other shard's, PostgreSQL runs no sequencer (``limit`` then bounds each shard's
        rows), and :meth:`events_pruned_through` still rises above every position a
        ``read_events`` reader could hold that missed an event removed."""

    async def prune_audit(self, before: float, limit: int) -> int:
        """Remove audit rows (:meth:`fetch_log`) fetched before ``before``, oldest first,
        about ``limit`` at most; return how many (PostgreSQL: an estimate for whole time
        partitions). Ids are never reused, so an audit reader's ``after`` stays valid."""

    async def save_segment(self, name: str, owner: str, state: str, size: int) -> None:
        """Upsert a segment's state (one of :data:`SEGMENT_STATES`) and size, stamped with
        the store clock; ``created_at`` is kept from the first call. An unknown state
        raises :class:`StoreError`."""

    async def segments(self, owner: str | None = None,
                       states: Collection[str] = ()) -> list[SegmentRecord]:
        """Segments of ``owner`` (all owners when None) in ``states`` (all when empty),
        ordered by name."""

    async def sitemap_changed(self, items: Sequence[tuple[bytes, float]], now: float) -> int:
        """A sitemap says these URLs (url_key, its ``lastmod``) changed: each known row
        that is QUEUED, was fetched before that ``lastmod`` and is not due yet becomes due
        ``now`` (``next_fetch_at = now``), with the ``lastmod`` kept as its
        ``sitemap_lastmod``. Other rows (unknown, never fetched: already due, SCHEDULED:
        in a frontier, RETIRED, fetched since) are left alone. No version bump, no event.
        Returns the rows made due."""

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
