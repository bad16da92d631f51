"""An in-memory Store: the simulator's store, and a reference for the contract suite.

Nothing survives the process; everything else follows the :class:`Store`
contract exactly (the same contract tests run against it). No threads: every
method completes without awaiting, so it is deterministic under the
simulator's virtual-time loop.

One class, :class:`MemoryStore`, owns all the state (rows, the host queue, hosts,
events, the archive's segments, and the cluster half: membership, shard leases, the
shared daily counts, host clocks, trap statistics, IP slots, scope rules); the refresh
plan is a part of its own (:class:`~courtier.store.memory_plans.MemoryPlans`, given
the rows) and the ready queue another (:class:`~courtier.store.memory_queue.ReadyQueue`).
Cluster times are the caller's ``now`` (the simulator's virtual clock);
:meth:`MemoryStore.store_now` is the store's own clock. Every method completes
without awaiting, so each is atomic under one event loop — which is what the
contract asks of a transaction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from courtier.core.clock import Clock, RealClock
from courtier.core.errors import StoreError
from courtier.core.outcome import Outcome
from courtier.store.base import (
    OVERDUE_AFTER,
    SEGMENT_STATES,
    CommitResult,
    DayCount,
    DueUrl,
    Event,
    FetchCommit,
    HostRecord,
    HostStatsDelta,
    HostTierRecord,
    NewUrl,
    PayloadLocation,
    ReparseEvent,
    SegmentRecord,
    ShardCursor,
    ShardPage,
    UrlState,
)
from courtier.store.cluster import (
    ClusterView,
    DayGrant,
    DayReservation,
    HostClock,
    IpGrant,
    LeaseRecord,
    ScopeRule,
    TrapStats,
    WorkerRecord,
)
from courtier.store.cluster_rules import (
    acquire_step,
    check_scope_kinds,
    day_grant,
    day_window,
    ip_retry_at,
)
from courtier.store.consumer_kinds import refuse_other_kind
from courtier.store.event_counts import EventCounts
from courtier.store.memory_outbox import MemoryAuditLog, MemoryOutbox
from courtier.store.memory_plans import MemoryPlans
from courtier.store.memory_queue import ReadyQueue

ROW_FIELDS = ("change_stats", "near_dup_of", "simhash", "sitemap_changefreq", "sitemap_lastmod",
              "url_key", "url", "host_key", "shard", "depth", "priority", "state", "version",
              "discovered_at", "last_fetch_at", "next_fetch_at", "interval", "status",
              "outcome", "etag", "last_modified", "content_type", "payload_digest",
              "content_length", "failure_count", "redirect_hops", "redirect_to", "warc_file",
              "warc_offset", "warc_length", "error_kind", "title", "robots_digest",
              "delay_applied", "redirect_chain", "value", "tier")


#: a shard never leased: no owner, epoch 0
FREE: tuple[str | None, int] = (None, 0)

KEPT_UNLESS_OK = ("etag", "last_modified", "content_type", "payload_digest", "content_length",
                  "warc_file", "warc_offset", "warc_length", "title", "simhash", "near_dup_of")


class MemoryStore:
    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or RealClock()
        self.urls: dict[bytes, dict[str, Any]] = {}
        self.hosts: dict[str, HostRecord] = {}
        #: shard -> (owner, epoch); held while the owner's worker lease is unexpired
        self.shards: dict[int, tuple[str | None, int]] = {}
        self.events = MemoryOutbox()  # events, registered consumer cursors, retention
        self._event_keys: set[tuple[bytes, int]] = set()
        self._reparse_keys: set[tuple[bytes, int, int]] = set()
        self.payloads: dict[str, PayloadLocation] = {}
        self._segments: dict[str, SegmentRecord] = {}
        self._fetch_log = MemoryAuditLog()
        self._queue = ReadyQueue()  # the QUEUED rows and the exact host queue
        self._policy_at: dict[str, float] = {}
        self.day_counts: dict[str, DayCount] = {}
        # the cluster half (membership, leases, host clocks, IP slots, scope rules)
        self._workers: dict[str, WorkerRecord] = {}
        #: owner -> when its worker lease, and so every shard it owns, expires
        self._worker_leases: dict[str, float] = {}
        self._acquired_at: dict[int, float] = {}
        self._last_owner: dict[int, str] = {}
        self._handovers = {"graceful": 0, "takeover": 0}
        self._host_clocks: dict[str, HostClock] = {}
        self._trap_stats: dict[str, TrapStats] = {}
        self._ip_next: dict[str, float] = {}
        #: ip -> token -> (expires_at, owner)
        self._ip_slots: dict[str, dict[int, tuple[float, str]]] = {}
        self._ip_token = 0
        self._scope: list[ScopeRule] = []
        self._plans = MemoryPlans(self.urls)

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def add_urls(self, urls: Sequence[NewUrl]) -> int:
        added = 0
        for new in urls:
            if new.url_key in self.urls:
                continue
            row = dict.fromkeys(ROW_FIELDS)
            row.update(dataclasses.asdict(new))
            row.update(state=int(UrlState.QUEUED), version=0, failure_count=0)
            self.urls[new.url_key] = row
            self._enqueue(row)
            added += 1
        return added

    async def reset_scheduled(self, shards: Sequence[int],
                              epochs: Mapping[int, int] | None = None) -> int:
        return await self._requeue_scheduled([s for s in shards if self._epoch_ok(s, epochs)])

    async def _requeue_scheduled(self, shards: Sequence[int]) -> int:
        wanted = set(shards)
        changed = 0
        for row in self.urls.values():
            if row["state"] == UrlState.SCHEDULED and row["shard"] in wanted:
                row["state"] = int(UrlState.QUEUED)
                self._enqueue(row)
                changed += 1
        return changed

    async def release(self, items: Sequence[tuple[bytes, float]],
                      epochs: Mapping[int, int] | None = None) -> int:
        changed = 0
        for key, at in items:
            row = self.urls.get(key)
            if (row is not None and row["state"] == UrlState.SCHEDULED
                    and self._epoch_ok(row["shard"], epochs)):
                row["state"] = int(UrlState.QUEUED)
                row["next_fetch_at"] = at
                self._enqueue(row)
                changed += 1
        return changed

    async def postpone(self, items: Sequence[tuple[bytes, int, float]],
                       epochs: Mapping[int, int] | None = None) -> int:
        changed = 0
        for key, version, at in items:
            row = self.urls.get(key)
            if (row is not None and row["state"] == UrlState.QUEUED
                    and row["version"] == version and self._epoch_ok(row["shard"], epochs)):
                row["next_fetch_at"] = at
                self._enqueue(row)  # re-indexed at its new due time
                changed += 1
        return changed

    def _enqueue(self, row: dict[str, Any]) -> None:
        """Index a row that is (now) QUEUED in the ready queue."""
        self._queue.add(row["url_key"], (row["shard"], row["host_key"]), row["priority"],
                        row["next_fetch_at"], row["depth"])

    async def load_due(self, shards: Sequence[int], now: float, limit: int,
                       per_host_limit: int, skip_hosts: Collection[str] = (),
                       epochs: Mapping[int, int] | None = None) -> list[DueUrl]:
        keys = self._select(shards, now, limit, per_host_limit, skip_hosts, epochs)
        for key in keys:
            self.urls[key]["state"] = int(UrlState.SCHEDULED)
        return [self._due_url(self.urls[key]) for key in keys]

    async def read_due(self, shards: Sequence[int], now: float, limit: int,
                       per_host_limit: int, skip_hosts: Collection[str] = (),
                       epochs: Mapping[int, int] | None = None) -> list[DueUrl]:
        keys = self._select(shards, now, limit, per_host_limit, skip_hosts, epochs)
        for key in keys:  # the walk took them out of the ready queue: they go back
            self._enqueue(self.urls[key])
        return [self._due_url(self.urls[key]) for key in keys]

    def _select(self, shards: Sequence[int], now: float, limit: int, per_host_limit: int,
                skip_hosts: Collection[str], epochs: Mapping[int, int] | None) -> list[bytes]:
        """The keys of the refill's rows in walk order, taken out of the ready queue."""
        if limit <= 0 or per_host_limit <= 0:
            return []
        shards = [s for s in shards if self._epoch_ok(s, epochs)]
        return self._queue.take(shards, now, now - OVERDUE_AFTER, limit, per_host_limit,
                                set(skip_hosts))

    @staticmethod
    def _due_url(row: dict[str, Any]) -> DueUrl:
        return DueUrl(
            row["url_key"], row["url"], row["host_key"], row["shard"], row["depth"],
            row["priority"], row["version"], row["next_fetch_at"], row["redirect_hops"],
            row["etag"], row["last_modified"], row["failure_count"], row["payload_digest"],
            row["change_stats"], row["last_fetch_at"], row["warc_file"], row["simhash"],
            row["sitemap_changefreq"], row["sitemap_lastmod"], row["redirect_chain"],
            row.get("value"))

    async def next_due_at(self, shards: Sequence[int], pending_only: bool = False) -> float | None:
        if not pending_only:
            return self._queue.earliest(shards)
        wanted = set(shards)
        times = [r["next_fetch_at"] for r in self.urls.values()
                 if r["state"] == UrlState.QUEUED and r["shard"] in wanted
                 and (r["version"] == 0 or r["failure_count"] > 0)]
        return min(times) if times else None

    async def pending_counts(self, shards: Sequence[int]) -> tuple[int, int]:
        wanted = set(shards)
        never = retrying = 0
        for r in self.urls.values():
            if r["state"] == UrlState.QUEUED and r["shard"] in wanted:
                if r["version"] == 0:
                    never += 1
                elif r["failure_count"] > 0:
                    retrying += 1
        return never, retrying

    async def commit(self, commits: Sequence[FetchCommit],
                     host_stats: Sequence[HostStatsDelta] = ()) -> CommitResult:
        applied = stale = 0
        new_total = 0
        for commit in commits:
            new_total += await self.add_urls(commit.new_urls)
            row = self.urls.get(commit.url_key)
            epoch = self.shards.get(commit.shard, FREE)[1]
            if (row is None or row["version"] != commit.version
                    or row["state"] == UrlState.RETIRED or epoch != commit.epoch):
                stale += 1
                continue
            applied += 1
            if row["state"] == UrlState.QUEUED:  # committed without a refill: re-index it
                self._queue.remove(commit.url_key)
            self._apply(row, commit)
        for delta in host_stats:
            host = self.hosts.setdefault(delta.host_key, HostRecord(delta.host_key, delta.shard))
            host.fetched += delta.fetched
            host.errors += delta.errors
            host.bytes += delta.bytes
            host.ttfb_sum += delta.ttfb_sum
        return CommitResult(applied, stale, new_total)

    def _apply(self, row: dict[str, Any], commit: FetchCommit) -> None:
        version = commit.version + 1
        for name in ("status", "redirect_to", "failure_count", "error_kind", "robots_digest",
                     "delay_applied", "interval", "next_fetch_at"):
            row[name] = getattr(commit, name)
        if commit.change_stats is not None:
            row["change_stats"] = commit.change_stats
        if commit.priority is not None:
            row["priority"] = commit.priority
        if commit.value is not None:
            row["value"] = commit.value
        if commit.tier is not None:
            row["tier"] = commit.tier
        ok = commit.outcome is Outcome.OK
        for name in KEPT_UNLESS_OK:
            value = getattr(commit, name)
            if ok or value is not None:  # a 304 or a retry keeps the validators it had
                row[name] = value
        row.update(version=version, outcome=str(commit.outcome),
                   last_fetch_at=commit.fetched_at,
                   state=int(UrlState.QUEUED if commit.next_fetch_at is not None
                             else UrlState.RETIRED))
        if commit.next_fetch_at is not None:
            self._enqueue(row)
        if (commit.url_key, version) not in self._event_keys:
            self._event_keys.add((commit.url_key, version))
            payload = dict(commit.event)
            payload.update(url_key=commit.url_key.hex(), url=commit.url, version=version,
                           outcome=str(commit.outcome))
            self.events.append(commit.url_key, version, self.clock.now(), payload)
        if commit.payload_digest and commit.warc_file and commit.warc_offset is not None:
            self.payloads.setdefault(commit.payload_digest, (
                commit.warc_file, commit.warc_offset, commit.url, commit.fetched_at))
        self._fetch_log.append({
            "url_key": commit.url_key, "version": version, "fetched_at": commit.fetched_at,
            "status": commit.status, "outcome": str(commit.outcome),
            "robots_digest": commit.robots_digest, "delay_applied": commit.delay_applied,
            "error_kind": commit.error_kind})

    async def get_url(self, url_key: bytes) -> dict[str, Any] | None:
        row = self.urls.get(url_key)
        if row is None:
            return None
        return {**row, "url_key_hex": url_key.hex()}

    async def load_host(self, host_key: str) -> HostRecord | None:
        record = self.hosts.get(host_key)
        return dataclasses.replace(record) if record is not None else None

    async def save_robots(self, record: HostRecord) -> None:
        host = self.hosts.setdefault(record.host_key, HostRecord(record.host_key, record.shard))
        for name in ("robots_status", "robots_fetched_at", "robots_expires_at",
                     "robots_digest", "crawl_delay", "robots_error_kind", "robots_error",
                     "robots_error_since", "robots_error_at"):
            setattr(host, name, getattr(record, name))
        if record.robots_body is not None:  # None keeps the last good copy
            host.robots_body = record.robots_body

    async def save_backoff(self, host_key: str, shard: int, until: float) -> None:
        host = self.hosts.setdefault(host_key, HostRecord(host_key, shard))
        host.backoff_until = until

    async def save_https_upgrade(self, host_key: str, shard: int,
                                 https_host_key: str | None) -> None:
        host = self.hosts.setdefault(host_key, HostRecord(host_key, shard))
        host.https_upgrade = https_host_key

    async def set_policy(self, host_key: str, shard: int, delay: float | None,
                         max_in_flight: int | None, max_pages: int | None,
                         blocked: bool) -> None:
        host = self.hosts.setdefault(host_key, HostRecord(host_key, shard))
        host.policy_delay, host.policy_max_in_flight = delay, max_in_flight
        host.policy_max_pages, host.blocked = max_pages, blocked
        self._policy_at[host_key] = self.clock.now()

    async def load_day_counts(self, keys: Collection[str]) -> dict[str, DayCount]:
        return {k: self.day_counts[k] for k in keys if k in self.day_counts}

    async def policies_changed(self, since: float) -> list[HostRecord]:
        return [dataclasses.replace(self.hosts[k]) for k, at in self._policy_at.items()
                if at > since and k in self.hosts]

    async def fetch_log(self, after: int = 0, limit: int = 1000,
                        url_key: bytes | None = None) -> list[dict[str, Any]]:
        return self._fetch_log.read(after, limit, url_key)

    async def payload_location(self, digest: str) -> PayloadLocation | None:
        return self.payloads.get(digest)

    async def payload_locations(self, digests: Sequence[str]) -> dict[str, PayloadLocation]:
        return {d: self.payloads[d] for d in digests if d in self.payloads}

    async def save_segment(self, name: str, owner: str, state: str, size: int) -> None:
        if state not in SEGMENT_STATES:
            raise StoreError(f"unknown segment state {state!r}")
        now = self.clock.now()
        old = self._segments.get(name)
        self._segments[name] = SegmentRecord(name, owner, state, size,
                                             old.created_at if old else now, now)

    async def segments(self, owner: str | None = None,
                       states: Collection[str] = ()) -> list[SegmentRecord]:
        return [s for _, s in sorted(self._segments.items())
                if (owner is None or s.owner == owner) and (not states or s.state in states)]

    async def sitemap_changed(self, items: Sequence[tuple[bytes, float]], now: float) -> int:
        changed = 0
        for url_key, lastmod in items:
            row = self.urls.get(url_key)
            if row is None or row["state"] != UrlState.QUEUED or row["last_fetch_at"] is None \
                    or row["last_fetch_at"] >= lastmod or row["next_fetch_at"] is None \
                    or row["next_fetch_at"] <= now:
                continue
            row["next_fetch_at"] = now
            row["sitemap_lastmod"] = lastmod
            self._enqueue(row)
            changed += 1
        return changed

    async def requeue_archive_file(self, warc_file: str, now: float) -> int:
        changed = 0
        for row in self.urls.values():
            if row.get("warc_file") != warc_file:
                continue
            for name in ("warc_file", "warc_offset", "warc_length", "payload_digest", "etag",
                         "last_modified"):
                row[name] = None
            row["state"] = int(UrlState.QUEUED)
            row["next_fetch_at"] = now
            self._enqueue(row)
            changed += 1
        for digest in [d for d, loc in self.payloads.items() if loc[0] == warc_file]:
            del self.payloads[digest]
        return changed

    async def add_reparse_events(self, events: Sequence[ReparseEvent]) -> int:
        added = 0
        for event in events:
            key = (event.url_key, event.version, event.parser_version)
            if event.parser_version < 1 or key in self._reparse_keys:
                continue
            self._reparse_keys.add(key)
            self.events.append(event.url_key, event.version, self.clock.now(),
                               dict(event.payload))
            added += 1
        return added

    async def read_events(self, after: int, limit: int) -> list[Event]:
        return self.events.read(after, limit)

    async def read_events_by_shard(self, cursor: ShardCursor, limit: int) -> ShardPage:
        return self.events.read_by_shard(cursor, limit)

    async def shard_cursor_at(self, position: int) -> ShardCursor:
        return self.events.shard_cursor_at(position)

    async def events_by_url(self, after: bytes | None, urls: int) -> list[Event]:
        return self.events.by_url(after, urls)

    async def warc_files_in_use(self, names: Collection[str]) -> set[str]:
        wanted = set(names)
        return {row["warc_file"] for row in self.urls.values()
                if row.get("warc_file") in wanted}

    async def register_consumer(self, name: str) -> int:
        refuse_other_kind(name, name in self.events.shard_consumers, by_shard=False)
        return self.events.register(name)

    async def consumer_position(self, name: str) -> int | None:
        return self.events.consumers.get(name)

    async def advance_consumer(self, name: str, position: int) -> int:
        refuse_other_kind(name, name in self.events.shard_consumers, by_shard=False)
        return self.events.advance(name, position)

    async def consumers(self) -> dict[str, int]:
        return dict(self.events.consumers)

    async def forget_consumer(self, name: str) -> bool:
        by_position = self.events.consumers.pop(name, None) is not None
        return self.events.shard_consumers.pop(name, None) is not None or by_position

    async def register_shard_consumer(self, name: str) -> ShardCursor:
        refuse_other_kind(name, name in self.events.consumers, by_shard=True)
        return self.events.register_by_shard(name)

    async def shard_consumer_position(self, name: str) -> ShardCursor | None:
        return self.events.shard_consumers.get(name)

    async def advance_shard_consumer(self, name: str, cursor: ShardCursor) -> ShardCursor:
        refuse_other_kind(name, name in self.events.consumers, by_shard=True)
        return self.events.advance_by_shard(name, cursor)

    async def shard_consumers(self) -> dict[str, ShardCursor]:
        return dict(sorted(self.events.shard_consumers.items()))

    async def event_counts(self) -> EventCounts:
        return self.events.counts()

    async def events_pruned_through(self) -> int:
        return self.events.pruned_through

    async def prune_events(self, before: float, limit: int) -> int:
        return self.events.prune(before, limit)

    async def prune_audit(self, before: float, limit: int) -> int:
        return self._fetch_log.prune(before, limit)

    async def due_within(self, shards: Sequence[int], until: float) -> int:
        wanted = set(shards)
        return sum(1 for r in self.urls.values() if r["state"] == UrlState.QUEUED
                   and r["shard"] in wanted and r["next_fetch_at"] < until)

    async def seed_urls(self, limit: int = 100_000) -> list[str]:
        return [r["url"] for r in self.urls.values() if r["depth"] == 0][:limit]

    async def set_values(self, items: Sequence[tuple[bytes, float | None]]) -> int:
        return self._plans.set_values(items)

    async def url_values(self, url_keys: Collection[bytes]) -> dict[bytes, float]:
        return self._plans.url_values(url_keys)

    async def set_host_tier(self, record: HostTierRecord) -> None:
        self._plans.set_host_tier(record)

    async def host_tiers(self, host_keys: Collection[str]) -> dict[str, HostTierRecord]:
        return self._plans.host_tiers(host_keys)

    async def tier_counts(self, shards: Sequence[int], until: float) -> dict[str, int]:
        return self._plans.tier_counts(shards, until)

    async def counts(self) -> dict[str, int]:
        rows = self.urls.values()
        return {
            "urls": len(self.urls),
            "queued": sum(1 for r in rows if r["state"] == UrlState.QUEUED),
            "scheduled": sum(1 for r in rows if r["state"] == UrlState.SCHEDULED),
            "retired": sum(1 for r in rows if r["state"] == UrlState.RETIRED),
            "fetched": sum(1 for r in rows if r["last_fetch_at"] is not None),
            "events": len(self.events),
            "hosts": len(self.hosts),
        }

    # ---- the cluster half (contract: store/cluster.py) -----------------------------------

    async def store_now(self) -> float:
        return self.clock.now()

    # ---- membership ----------------------------------------------------------------------

    async def heartbeat(self, worker_id: str, weight: float, info: Mapping[str, Any],
                        now: float, lease_seconds: float | None = None) -> float:
        old = self._workers.get(worker_id)
        self._workers[worker_id] = WorkerRecord(
            worker_id, weight, now, old.started_at if old else now, dict(info))
        if lease_seconds is not None:
            self._worker_leases[worker_id] = now + lease_seconds
        return now

    async def leave(self, worker_id: str) -> None:
        self._workers.pop(worker_id, None)

    async def prune_workers(self, max_age: float, now: float) -> list[str]:
        def silent(owner: str) -> bool:
            record = self._workers.get(owner)
            last = self._lease_expiry(owner) if record is None else record.heartbeat_at
            return last < now - max_age and self._lease_expiry(owner) <= now

        gone = sorted(w for w in self._workers if silent(w))
        for owner in [o for o in self._worker_leases if silent(o)]:
            del self._worker_leases[owner]
        for worker_id in gone:
            del self._workers[worker_id]
        return gone

    async def cluster_view(self, shards: Collection[int] | None = None) -> ClusterView:
        wanted = sorted(self.shards) if shards is None else sorted(
            s for s in set(shards) if s in self.shards)
        leases = [LeaseRecord(s, owner, epoch, self._lease_expiry(owner),
                              self._acquired_at.get(s, 0.0))
                  for s in wanted for owner, epoch in (self.shards[s],)]
        workers = [self._workers[k] for k in sorted(self._workers)]
        return ClusterView(self.clock.now(), workers, leases, dict(self._handovers))

    # ---- leases --------------------------------------------------------------------------

    async def acquire_shards(self, owner: str, shards: Sequence[int], now: float,
                             lease_seconds: float) -> dict[int, int]:
        if not shards:
            return {}
        held: dict[int, int] = {}
        for shard in shards:
            current, epoch = self.shards.get(shard, FREE)
            step = acquire_step(owner, current, epoch, self._lease_expiry(current),
                                self._last_owner.get(shard), now)
            if step is None:
                continue
            if step.handover is not None:
                self._handovers[step.handover] += 1
            if step.new_term:
                self._acquired_at[shard] = now
            self.shards[shard] = (owner, step.epoch)
            self._last_owner[shard] = owner
            held[shard] = step.epoch
        self._worker_leases[owner] = now + lease_seconds  # renews every shard it owns
        return held

    async def renew_shards(self, owner: str, epochs: dict[int, int], now: float,
                           lease_seconds: float) -> set[int]:
        if not epochs:
            return set()
        self._worker_leases[owner] = now + lease_seconds
        return {shard for shard, epoch in epochs.items()
                if self.shards.get(shard, FREE) == (owner, epoch)}

    async def release_shards(self, owner: str, shards: Sequence[int],
                             epochs: Mapping[int, int] | None = None) -> None:
        mine = []
        for shard in shards:
            current, epoch = self.shards.get(shard, FREE)
            if current != owner or (epochs is not None and epochs.get(shard) != epoch):
                continue
            self.shards[shard] = (None, epoch + 1)
            self._acquired_at.pop(shard, None)
            mine.append(shard)
        await self._requeue_scheduled(mine)

    def _lease_expiry(self, owner: str | None) -> float:
        """When ``owner``'s worker lease expires (0: no owner, or none ever renewed)."""
        return 0.0 if owner is None else self._worker_leases.get(owner, 0.0)

    def _epoch_ok(self, shard: int, epochs: Mapping[int, int] | None) -> bool:
        """True when a write fenced by ``epochs`` may touch ``shard``."""
        return epochs is None or (shard in epochs
                                  and self.shards.get(shard, FREE)[1] == epochs[shard])

    # ---- shared daily budget -------------------------------------------------------------

    async def reserve_day_counts(self, reservations: Sequence[DayReservation]
                                 ) -> dict[str, DayGrant]:
        grants: dict[str, DayGrant] = {}
        for ask in reservations:
            stored = self.day_counts.get(ask.key)
            start, used = day_window(ask, None if stored is None else (stored.day_start,
                                                                        stored.used))
            granted = day_grant(ask, used)
            used += granted
            self.day_counts[ask.key] = DayCount(ask.key, start, used)
            grants[ask.key] = DayGrant(ask.key, start, granted, used)
        return grants

    # ---- host politeness clocks ----------------------------------------------------------

    async def save_host_clocks(self, clocks: Sequence[HostClock]) -> None:
        now = self.clock.now()
        for clock in clocks:
            self._host_clocks[clock.host_key] = dataclasses.replace(clock, saved_at=now)

    async def load_host_clocks(self, host_keys: Collection[str]) -> dict[str, HostClock]:
        return {k: self._host_clocks[k] for k in host_keys if k in self._host_clocks}

    # ---- trap statistics and near-duplicate fingerprints of a shard -----------------------

    async def save_trap_stats(self, stats: Sequence[TrapStats]) -> None:
        now = self.clock.now()
        for item in stats:
            self._trap_stats[item.host_key] = dataclasses.replace(
                item, data=bytes(item.data), saved_at=now)

    async def load_trap_stats(self, host_keys: Collection[str]) -> dict[str, TrapStats]:
        return {k: self._trap_stats[k] for k in host_keys if k in self._trap_stats}

    async def load_simhashes(self, shards: Collection[int], limit_per_shard: int
                             ) -> dict[int, list[tuple[bytes, int]]]:
        wanted = set(shards)
        found: dict[int, list[tuple[float, bytes, int]]] = {}
        for key, row in self.urls.items():
            if row["shard"] in wanted and row.get("simhash") is not None:
                found.setdefault(row["shard"], []).append(
                    (-(row["last_fetch_at"] or 0.0), key, row["simhash"]))
        out = {}
        for shard, rows in found.items():
            rows.sort()
            if limit_per_shard > 0:
                out[shard] = [(key, fp) for _, key, fp in rows[:limit_per_shard]]
        return out

    async def url_keys(self, shards: Sequence[int], after: bytes, limit: int) -> bytes:
        wanted = set(shards)
        found = sorted(k for k, row in self.urls.items() if row["shard"] in wanted and k > after)
        return b"".join(found[:max(0, limit)])

    # ---- per-IP slots --------------------------------------------------------------------

    async def acquire_ip_slot(self, ip: str, owner: str, max_concurrent: int,
                              min_gap: float, ttl: float, now: float) -> IpGrant:
        slots = {t: held for t, held in self._ip_slots.get(ip, {}).items() if held[0] > now}
        self._ip_slots[ip] = slots
        retry = ip_retry_at(self._ip_next.get(ip, float("-inf")),
                            [expires for expires, _ in slots.values()], max_concurrent, now)
        if retry is not None:
            return IpGrant(False, now, retry_at=retry)
        self._ip_token += 1
        slots[self._ip_token] = (now + ttl, owner)
        self._ip_next[ip] = now + min_gap
        return IpGrant(True, now, self._ip_token, now + ttl)

    async def release_ip_slot(self, ip: str, token: int) -> None:
        self._ip_slots.get(ip, {}).pop(token, None)

    async def release_ip_slots_of(self, owner: str) -> int:
        freed = 0
        for slots in self._ip_slots.values():
            mine = [t for t, (_, holder) in slots.items() if holder == owner]
            for token in mine:
                del slots[token]
            freed += len(mine)
        return freed

    # ---- scope ---------------------------------------------------------------------------

    async def add_scope_rules(self, rules: Sequence[ScopeRule]) -> int:
        check_scope_kinds(rules)
        known = {(r.kind, r.value) for r in self._scope}
        added = 0
        for rule in rules:
            if (rule.kind, rule.value) in known:
                continue
            known.add((rule.kind, rule.value))
            self._scope.append(ScopeRule(rule.kind, rule.value, len(self._scope) + 1))
            added += 1
        return added

    async def scope_rules(self, after: int = 0) -> list[ScopeRule]:
        return [r for r in self._scope if r.id > after]
