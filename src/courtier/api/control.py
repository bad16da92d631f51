"""What the admin API may do to a crawl: :class:`CrawlControl` and its two implementations.

* :class:`~courtier.api.worker_control.WorkerControl` — over a live
  :class:`~courtier.worker.Worker` in the same process and event loop. Answers
  combine the durable store with the running frontier (queues, in-flight fetches,
  back-off, robots state).
* :class:`StoreOnlyControl` — over a :class:`~courtier.store.base.Store`
  alone (``courtier … --data DIR`` with no crawl running): the same answers
  where the store has them; live parts are empty or null.

Domains: a ``domain`` argument is an *authority* (``host`` or ``host:port``),
and names its http and https host keys (see :func:`views.host_keys_for`).
Policies are stored per host key — the unit the frontier enforces delays on — so
a policy put on ``example.com`` is stored on ``http://example.com`` and
``https://example.com``; as the registrable domain's policy it also covers
``www.example.com`` and every other subdomain without a policy of its own
(:mod:`courtier.crawl.domain_policy`).

Every method is a coroutine that returns JSON-able data. Wrong input raises
:class:`~courtier.api.views.ApiInputError`, an unknown URL or host
:class:`~courtier.api.views.ApiNotFound`, a store failure
:class:`~courtier.core.errors.StoreError`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

from courtier.api import views
from courtier.api.crawl_figures import idle_figures, store_figures, with_running
from courtier.api.freshness import FreshnessControl
from courtier.api.jsonable import json_safe
from courtier.api.views import ApiInputError, EventTally
from courtier.core.clock import Clock, RealClock
from courtier.core.config import CrawlConfig, offline_config
from courtier.core.errors import ConfigError, InvalidURL
from courtier.core.shard_cursor import ShardCursor
from courtier.core.urls import canonicalize, shard_of
from courtier.crawl.domain_policy import policy_in_force
from courtier.crawl.intake import SEED_PRIORITY, Scope
from courtier.frontier.host import HostPolicy, domain_host_key
from courtier.politeness.robots import product_token
from courtier.store.base import HostTierRecord, NewUrl, Store

#: priority of URLs added through the API: ahead of seeds given at start and of links
API_SEED_PRIORITY = SEED_PRIORITY + 10
MAX_SEEDS_PER_CALL = 10_000
MAX_EVENTS_PER_CALL = 1_000
EVENTS_PER_TALLY = 5_000  # events folded into the errors-by-host tally per call


class CrawlControl(Protocol):
    """The operations the admin API needs. All return JSON-able values."""

    async def add_seeds(
        self, urls: Sequence[str], extend_scope: bool = False, priority: int | None = None
    ) -> list[dict[str, Any]]:
        """One result per input, in order: ``{"url", "result": "accepted" | "duplicate" |
        "rejected", "reason", "canonical", "url_key"}``. Accepted URLs are in the store
        when this returns and get ``priority`` (None: :data:`API_SEED_PRIORITY`)."""

    async def get_policy(self, domain: str) -> dict[str, Any]:
        """The override in force for ``domain`` (all null/false: crawl defaults)."""

    async def put_policy(self, domain: str, policy: HostPolicy) -> dict[str, Any]:
        """Store the override durably and apply it to the running frontier at once."""

    async def delete_policy(self, domain: str) -> dict[str, Any]:
        """Return ``domain`` to the crawl defaults (durably and at once)."""

    async def url_state(self, url_key: bytes) -> dict[str, Any]:
        """The URL row, its robots.txt decision and its fetch history (if the store has one)."""

    async def domain_stats(self, domain: str) -> dict[str, Any]:
        """Stored counters and live frontier state of the domain's host keys."""

    async def crawl_stats(self) -> dict[str, Any]:
        """Crawl-wide figures: progress, store counts, status mix, politeness, budget."""

    async def top_hosts(self, by: str, limit: int) -> list[dict[str, Any]]:
        """Hosts with the longest queues (``by="queue"``) or most errors (``"errors"``)."""

    async def events(self, after: int, limit: int) -> dict[str, Any]:
        """Outbox events with ``id > after``: ``{"events": [...], "next_after": id}``."""

    async def shard_events(self, token: str, limit: int) -> dict[str, Any]:
        """Outbox events above a per-shard cursor token ("": from the first):
        ``{"events": [...], "cursor": token}`` (``Store.read_events_by_shard``)."""

    async def consumer_events(self, name: str, after: int | None,
                              limit: int) -> dict[str, Any]:
        """:meth:`events` for the consumer cursor ``name`` registered in the store: ``after``
        (if given) acknowledges the events up to it, moving the cursor forward; the events
        returned follow the cursor. Adds ``"consumer"`` and ``"position"`` (the cursor).
        A consumer registered per shard is read as :meth:`shard_consumer_events`."""

    async def shard_consumer_events(self, name: str, acknowledged: str | None,
                                    limit: int) -> dict[str, Any]:
        """:meth:`shard_events` for the per-shard consumer ``name`` (registered so if new):
        ``acknowledged`` (a cursor token, if given) moves its cursor forward; the events
        returned follow the cursor. Adds ``"consumer"`` and ``"position"`` (its token)."""

    async def shard_cursor_at(self, position: int) -> dict[str, Any]:
        """``{"at": position, "cursor": token}``: the per-shard cursor of a reader that has
        read every event with an id (crawl-wide position) at or below ``position``
        (``Store.shard_cursor_at``; :class:`~courtier.core.errors.EventsPruned` when the
        retention removed events after it)."""

    async def cluster(self, worker_ttl: float) -> dict[str, Any]:
        """Workers, shards per worker, epochs, lease ages and handovers (store clock):
        :func:`courtier.cluster.report.cluster_report`."""

    async def set_values(self, items: Sequence[tuple[str, float]]) -> dict[str, Any]:
        """Set URL values (``api/freshness.py``): ``{"updated", "unknown"}``."""

    async def get_freshness(self, domain: str) -> dict[str, Any]:
        """The domain's freshness override (tier, interval bounds, value factor)."""

    async def put_freshness(self, domain: str, record: HostTierRecord) -> dict[str, Any]:
        """Store the override (all None: remove it); the crawl applies it at the next refill."""


#: consumer lag is counted up to this many unread events
CONSUMER_LAG_CAP = 10_000


class StoreOnlyControl(FreshnessControl):
    """:class:`CrawlControl` over a store with no crawl running in this process."""

    def __init__(
        self, store: Store, config: CrawlConfig | None = None, clock: Clock | None = None
    ) -> None:
        self.store = store
        self.config = config or offline_config()
        self.clock: Clock = clock or RealClock()
        self.agent = product_token(self.config.user_agent)
        self.tally = EventTally()
        self._scope: Scope | None = None

    # ---- hooks the live control overrides ----------------------------------------------

    async def _scope_now(self) -> Scope:
        if self._scope is None:
            seeds = []
            for url in await self.store.seed_urls():
                try:
                    seeds.append(canonicalize(url))
                except InvalidURL:
                    continue
            self._scope = Scope(self.config, seeds)
        return self._scope

    async def _store_rows(self, rows: Sequence[NewUrl]) -> None:
        await self.store.add_urls(rows)

    def _apply_policy(self, host_key: str, policy: HostPolicy) -> bool:
        """Apply to the running frontier; True when a live host took it."""
        return False

    def _live_host(self, host_key: str) -> dict[str, Any] | None:
        return None

    def _live_robots(self, host_key: str, url: str) -> dict[str, Any] | None:
        return None

    def _live_stats(self) -> dict[str, Any]:
        return idle_figures(self.config)

    def _live_top(self, limit: int) -> list[dict[str, Any]]:
        return []

    # ---- seeds ---------------------------------------------------------------------------

    async def add_seeds(
        self, urls: Sequence[str], extend_scope: bool = False, priority: int | None = None
    ) -> list[dict[str, Any]]:
        if len(urls) > MAX_SEEDS_PER_CALL:
            raise ApiInputError(f"at most {MAX_SEEDS_PER_CALL} URLs per call")
        scope = await self._scope_now()
        now = self.clock.now()
        results: list[dict[str, Any]] = []
        rows: list[NewUrl] = []
        batch: set[bytes] = set()
        blocked: dict[str, bool] = {}
        rank = API_SEED_PRIORITY if priority is None else priority
        for raw in urls:
            result: dict[str, Any] = {
                "url": raw if isinstance(raw, str) else None,  # never echo a nested value
                "result": "rejected",
                "reason": None,
                "canonical": None,
                "url_key": None,
            }
            results.append(result)
            if not isinstance(raw, str):
                result["reason"] = "bad URL: not a string"
                continue
            try:
                url = canonicalize(raw)
            except InvalidURL as exc:
                result["reason"] = f"bad URL: {exc}"
                continue
            result.update(canonical=url.url, url_key=url.url_key.hex())
            why = None if extend_scope else scope.rejects(url, 0)
            if why is not None:
                result["reason"] = f"out of scope: {why}"
                continue
            if url.host_key not in blocked:
                blocked[url.host_key] = await self._host_blocked(url.host_key)
            if blocked[url.host_key]:
                result["reason"] = "blocked by policy"
                continue
            if url.url_key in batch or await self.store.get_url(url.url_key) is not None:
                result.update(result="duplicate", reason="already known")
                continue
            batch.add(url.url_key)
            if extend_scope:
                scope.add_seed(url)
            rows.append(
                NewUrl(
                    url.url_key, url.url, url.host_key, url.shard, 0, rank, now, now
                )
            )
            result.update(result="accepted", reason=None)
        if rows:
            await self._store_rows(rows)
            if extend_scope:  # every worker of the crawl applies these (Store.scope_rules)
                seeds = [canonicalize(row.url) for row in rows]
                await self.store.add_scope_rules(
                    [rule for seed in seeds for rule in Scope.rules_for(seed)])
        return results

    async def cluster(self, worker_ttl: float) -> dict[str, Any]:
        from courtier.cluster.report import cluster_report

        return cluster_report(await self.store.cluster_view(), worker_ttl)

    async def _host_blocked(self, host_key: str) -> bool:
        """Blocked by its own policy, or by its registrable domain's when it has none."""
        record = await self.store.load_host(host_key)
        policy, _ = await policy_in_force(self.store, host_key, record)
        return policy.blocked

    # ---- policies ------------------------------------------------------------------------

    async def get_policy(self, domain: str) -> dict[str, Any]:
        keys = views.host_keys_for(domain)
        hosts = []
        for key in keys:
            policy = views.policy_of(await self.store.load_host(key))
            hosts.append(
                {
                    "host_key": key,
                    "policy": views.policy_view(policy),
                    "override": not views.is_default(policy),
                }
            )
        chosen = next((h for h in hosts if h["override"]), hosts[0])
        answer = {
            "domain": domain,
            "policy": chosen["policy"],
            "override": chosen["override"],
            "inherited_from": None,
            "hosts": hosts,
            "defaults": self._defaults(),
        }
        if not chosen["override"]:  # a subdomain: its registrable domain's policy covers it
            for key in keys:
                policy, inherited = await policy_in_force(self.store, key, None)
                if inherited:
                    answer.update(policy=views.policy_view(policy),
                                  inherited_from=domain_host_key(key))
                    break
        return answer

    def _defaults(self) -> dict[str, Any]:
        return {"delay": self.config.delay, "max_in_flight": self.config.max_in_flight_per_host}

    async def put_policy(self, domain: str, policy: HostPolicy) -> dict[str, Any]:
        keys = views.host_keys_for(domain)
        applied = []
        for key in keys:
            await self.store.set_policy(
                key,
                shard_of(key),
                policy.delay,
                policy.max_in_flight,
                policy.max_pages,
                policy.blocked,
            )
            if self._apply_policy(key, dataclasses.replace(policy)):
                applied.append(key)
        answer = await self.get_policy(domain)
        answer["applied_live"] = applied
        return answer

    async def delete_policy(self, domain: str) -> dict[str, Any]:
        return await self.put_policy(domain, HostPolicy())

    # ---- URLs ----------------------------------------------------------------------------

    async def url_state(self, url_key: bytes) -> dict[str, Any]:
        row = await self.store.get_url(url_key)
        if row is None:
            raise views.ApiNotFound(f"unknown URL key {url_key.hex()}")
        url, host_key = str(row["url"]), str(row["host_key"])
        # a robots.txt of 500 KiB costs ~0.1 s to parse and decide: off the loop
        robots = await asyncio.to_thread(self._live_robots, host_key, url)
        if robots is None:
            record = await self.store.load_host(host_key)
            robots = await asyncio.to_thread(views.stored_robots_decision, record, self.agent,
                                             url, self.clock.now())
        return {
            "url": views.url_row_view(row),
            "robots": robots,
            "history": await self._history(url_key),
        }

    async def _history(self, url_key: bytes, limit: int = 50) -> list[dict[str, Any]]:
        """The URL's fetch audit trail (oldest first, at most ``limit`` rows)."""
        rows = await self.store.fetch_log(0, limit, url_key)
        return [dict(json_safe(r)) for r in rows]

    # ---- figures -------------------------------------------------------------------------

    async def domain_stats(self, domain: str) -> dict[str, Any]:
        keys = views.host_keys_for(domain)
        await self._fold_events()
        now = self.clock.now()
        hosts = []
        for key in keys:
            record = await self.store.load_host(key)
            live = self._live_host(key)
            if record is None and live is None:
                continue
            hosts.append(
                {
                    "host_key": key,
                    "stored": None if record is None else views.stored_host_view(record, now),
                    "live": live,
                    "errors_seen": self.tally.host_errors.get(key, 0),
                }
            )
        if not hosts:
            raise views.ApiNotFound(f"no host known for {domain!r}")
        return {"domain": domain, "hosts": hosts, "defaults": self._defaults()}

    async def _fold_events(self) -> None:
        page = await self.store.read_events_by_shard(self.tally.cursor, EVENTS_PER_TALLY)
        self.tally.add(page.events)
        self.tally.cursor = page.cursor

    async def crawl_stats(self) -> dict[str, Any]:
        stats = self._live_stats()
        stats.update(await store_figures(self.store, self.config, self.clock.now(),
                                         self._live_plan()))
        return with_running(stats)

    async def top_hosts(self, by: str, limit: int) -> list[dict[str, Any]]:
        if by == "queue":
            return self._live_top(limit)
        if by != "errors":
            raise ApiInputError("by must be 'queue' or 'errors'")
        await self._fold_events()
        return [
            {"host_key": key, "errors": count, "live": self._live_host(key)}
            for key, count in self.tally.host_errors.most_common(limit)
        ]

    async def consumer_events(self, name: str, after: int | None,
                              limit: int) -> dict[str, Any]:
        if after is None and await self.store.shard_consumer_position(name) is not None:
            return await self.shard_consumer_events(name, None, limit)
        try:
            position = (await self.store.register_consumer(name) if after is None
                        else await self.store.advance_consumer(name, after))
        except ConfigError as exc:  # a per-shard consumer acknowledges with cursor=
            raise ApiInputError(f"consumer: {exc}") from None
        return {**await self.events(position, limit), "consumer": name, "position": position}

    async def shard_consumer_events(self, name: str, acknowledged: str | None,
                                    limit: int) -> dict[str, Any]:
        try:
            position = (await self.store.register_shard_consumer(name) if not acknowledged
                        else await self.store.advance_shard_consumer(
                            name, ShardCursor.from_token(acknowledged)))
        except ConfigError as exc:
            raise ApiInputError(f"consumer: {exc}") from None
        return {**await self.shard_events(position.token(), limit), "consumer": name,
                "position": position.token()}

    async def shard_events(self, token: str, limit: int) -> dict[str, Any]:
        if not 1 <= limit <= MAX_EVENTS_PER_CALL:
            raise ApiInputError(f"limit must be in 1..{MAX_EVENTS_PER_CALL}")
        try:
            cursor = ShardCursor.from_token(token) if token else ShardCursor()
        except ConfigError as exc:
            raise ApiInputError(f"cursor: {exc}") from None
        page = await self.store.read_events_by_shard(cursor, limit)
        return {"events": [views.shard_event_view(e) for e in page.events],
                "cursor": page.cursor.token()}

    async def shard_cursor_at(self, position: int) -> dict[str, Any]:
        cursor = await self.store.shard_cursor_at(position)
        return {"at": position, "cursor": cursor.token()}

    async def events(self, after: int, limit: int) -> dict[str, Any]:
        if after < 0 or not 1 <= limit <= MAX_EVENTS_PER_CALL:
            raise ApiInputError(f"after must be >= 0 and limit in 1..{MAX_EVENTS_PER_CALL}")
        events = await self.store.read_events(after, limit)
        return {
            "events": [views.event_view(e) for e in events],
            "next_after": events[-1].id if events else after,
        }
