"""The store's part of ``GET /v1/stats``, with light imports.

:meth:`StoreOnlyControl.crawl_stats <courtier.api.control.StoreOnlyControl.crawl_stats>`
builds its answer here, and ``courtier stats --data`` calls :func:`stats_answer`
directly: the same JSON as the API's, without loading the API views, the frontier
or the robots code (``courtier stats`` is a one-shot command; its start-up is most
of its cost). The event figures are the store's counters (``store/event_counts.py``).
"""

from __future__ import annotations

from typing import Any

from courtier.core.config import CrawlConfig
from courtier.core.errors import StoreError
from courtier.core.urls import SHARD_COUNT
from courtier.store.base import Store

DAY = 86_400.0

#: which figures of ``GET /v1/stats`` are the whole crawl's (from the store, whatever
#: answers) and which the answering worker's own (null when no crawl runs in the process
#: that answers: ``courtier stats --data/--store``). Sent as ``figures`` in every answer.
FIGURE_SCOPES: dict[str, list[str]] = {
    "crawl_wide": ["store", "refresh", "status_mix", "outcomes", "events_seen",
                   "live_workers"],
    "this_worker": ["status", "politeness", "budget"],
}

#: seconds since its last heartbeat for which a worker counts as live (the default
#: --lease-ttl, as ``courtier cluster``)
LIVE_WORKER_TTL = 30.0


def idle_figures(config: CrawlConfig) -> dict[str, Any]:
    """The live part of the answer when no crawl runs in this process."""
    return {
        "running": False,
        "status": None,
        "politeness": None,
        "budget": {
            "max_pages": config.max_pages,
            "pages": None,
            "max_seconds": config.max_seconds,
            "elapsed": None,
        },
    }


async def tier_budget(store: Store, now: float, live: dict[str, dict[str, float]] | None
                      ) -> dict[str, dict[str, float | int | None]]:
    """By tier: ``due_24h`` (store), ``planned_per_day`` and ``spent`` (running crawl)."""
    due = await store.tier_counts(range(SHARD_COUNT), now + DAY)
    out: dict[str, dict[str, float | int | None]] = {}
    for name in sorted(set(due) | set(live or {})):
        plan = (live or {}).get(name, {})
        out[name] = {"due_24h": due.get(name, 0),
                     "planned_per_day": plan.get("planned_per_day"),
                     "spent": plan.get("spent")}
    return out


async def live_workers(store: Store, worker_ttl: float = LIVE_WORKER_TTL) -> list[str]:
    """Ids (sorted) of the workers whose heartbeat in the store is younger than
    ``worker_ttl`` on the store's clock: the processes crawling it now (a cluster's; a
    single embedded crawl does not heartbeat)."""
    view = await store.cluster_view()
    return sorted(w.worker_id for w in view.workers if w.heartbeat_at + worker_ttl > view.now)


async def store_figures(store: Store, config: CrawlConfig, now: float,
                        live_plan: dict[str, dict[str, float]] | None) -> dict[str, Any]:
    """time, store counts, refresh load and budget, status mix, outcomes, events seen,
    the live workers, and which figures are crawl-wide (``figures``)."""
    counted = await store.event_counts()
    return {
        "figures": FIGURE_SCOPES,
        "live_workers": await live_workers(store),
        "time": now,
        "store": await store.counts(),
        "refresh": {
            "due_next_24h": await store.due_within(range(SHARD_COUNT), now + DAY),
            "daily_budget": config.daily_budget,
            "tiers": await tier_budget(store, now, live_plan),
        },
        "status_mix": counted.status_mix,
        "outcomes": counted.outcomes,
        "events_seen": counted.events,
    }


def with_running(answer: dict[str, Any], crawling_elsewhere: bool = False) -> dict[str, Any]:
    """``running``: this process crawls, live workers heartbeat in the store, or (an
    embedded store) another process holds the crawl's --data."""
    answer["running"] = bool(answer["running"] or answer["live_workers"] or
                             crawling_elsewhere)
    return answer


async def stats_answer(store: Store, config: CrawlConfig, now: float,
                       crawling_elsewhere: bool = False) -> tuple[int, Any]:
    """(HTTP status, JSON) of ``GET /v1/stats`` over a store with no crawl in this process,
    as :func:`courtier.api.routes.invoke` answers it (a store failure is a 503).
    ``crawling_elsewhere``: another process holds the data folder's lock."""
    from courtier.api.jsonable import json_safe

    try:
        answer = idle_figures(config)
        answer.update(await store_figures(store, config, now, None))
    except StoreError as exc:
        return 503, {"error": f"store unavailable: {exc}"}
    return 200, json_safe(with_running(answer, crawling_elsewhere))
