"""The admin API over a running crawl: :class:`WorkerControl`, the
:class:`~courtier.api.control.CrawlControl` of a :class:`~courtier.worker.Worker` in
this process and event loop. Answers are the store's (:class:`StoreOnlyControl`) plus
what only the running frontier knows: queues, fetches in flight, back-off, robots
state, throttled trap templates, the refresh plan; seeds and policies reach the
frontier at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from courtier.api import views
from courtier.api.control import CONSUMER_LAG_CAP, StoreOnlyControl
from courtier.core.shard_cursor import ShardCursor
from courtier.crawl.intake import Scope
from courtier.frontier.host import HostPolicy
from courtier.store.base import NewUrl

if TYPE_CHECKING:
    from courtier.crawl.worker import Worker


class WorkerControl(StoreOnlyControl):
    """:class:`CrawlControl` over a running :class:`Worker` of this process and loop.

    Must be called on the worker's event loop (the frontier takes no locks).
    """

    async def events(self, after: int, limit: int) -> dict[str, Any]:
        answer = await super().events(after, limit)
        # consumer lag: outbox events the reader has not read yet (counted up to a cap)
        behind = await self.store.read_events(answer["next_after"], CONSUMER_LAG_CAP)
        self.worker.metrics.consumer_lag.set(len(behind))
        return answer

    async def shard_events(self, token: str, limit: int) -> dict[str, Any]:
        answer = await super().shard_events(token, limit)
        cursor = ShardCursor.from_token(answer["cursor"])
        behind = await self.store.read_events_by_shard(cursor, CONSUMER_LAG_CAP)
        self.worker.metrics.consumer_lag.set(len(behind.events))
        return answer

    def __init__(self, worker: Worker) -> None:
        super().__init__(worker.store, worker.config, worker.clock)
        self.worker = worker
        self.agent = worker.agent

    async def _scope_now(self) -> Scope:
        return self.worker.intake.scope

    async def _store_rows(self, rows: Sequence[NewUrl]) -> None:
        await self.worker.add_seeds(rows)
        wake = getattr(self.worker, "wake", None)
        if callable(wake):
            wake()

    async def _host_blocked(self, host_key: str) -> bool:
        host = self.worker.frontier.hosts.get(host_key)
        if host is not None:
            return host.policy.blocked
        return await super()._host_blocked(host_key)

    def _apply_policy(self, host_key: str, policy: HostPolicy) -> bool:
        frontier = self.worker.frontier
        if not frontier.knows_host(host_key):
            return False  # registered later from the store row, which already has it
        frontier.set_policy(host_key, policy)
        return True

    def _live_host(self, host_key: str) -> dict[str, Any] | None:
        frontier = self.worker.frontier
        host = frontier.hosts.get(host_key)
        traps = self.worker.intake.traps
        throttled = [] if traps is None else [
            {"template": r.template, "admitted": r.admitted, "discovered": r.discovered,
             "duplicate_share": r.duplicate_share, "since": r.since, "reason": r.reason}
            for r in traps.throttled(host_key)]
        if host is None:
            return None if not throttled else {"throttled_templates": throttled}
        view = views.live_host_view(host, self.clock.now(), frontier.delay_for(host))
        view["throttled_templates"] = throttled
        return view

    def _live_robots(self, host_key: str, url: str) -> dict[str, Any] | None:
        host = self.worker.frontier.hosts.get(host_key)
        if host is None:
            return None
        return views.live_robots_decision(host, self.agent, url)

    def _live_plan(self) -> dict[str, dict[str, float]] | None:
        return self.worker.processor.planner.controller.view()

    def _live_stats(self) -> dict[str, Any]:
        worker, now = self.worker, self.clock.now()
        status = worker.status
        figures = {k: v for k, v in dataclasses.asdict(status).items() if k != "warc_files"}
        figures["pages_per_second"] = status.pages_per_second
        elapsed = (status.now or now) - status.started_at if status.started_at else 0.0
        return {
            "running": status.started_at > 0 and not status.stop_reason,
            "status": figures,
            "politeness": views.politeness_summary(worker.frontier, now, worker.auditor.violations),
            "budget": {
                "max_pages": self.config.max_pages,
                "pages": status.pages,
                "max_seconds": self.config.max_seconds,
                "elapsed": elapsed,
            },
        }

    def _live_top(self, limit: int) -> list[dict[str, Any]]:
        hosts = sorted(
            self.worker.frontier.hosts.values(),
            key=lambda h: (-len(h.queue), -h.in_flight, h.host_key),
        )
        return [
            {
                "host_key": h.host_key,
                "errors": self.tally.host_errors.get(h.host_key, 0),
                "live": self._live_host(h.host_key),
            }
            for h in hosts[:limit]
            if h.queue or h.in_flight
        ]
