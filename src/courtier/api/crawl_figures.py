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


async def store_figures(store: Store, config: CrawlConfig, now: float,
                        live_plan: dict[str, dict[str, float]] | None) -> dict[str, Any]:
    """time, store counts, refresh load and budget, status mix, outcomes, events seen."""
    counted = await store.event_counts()
    return {
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


async def stats_answer(store: Store, config: CrawlConfig, now: float) -> tuple[int, Any]:
    """(HTTP status, JSON) of ``GET /v1/stats`` over a store with no crawl in this process,
    as :func:`courtier.api.routes.invoke` answers it (a store failure is a 503)."""
    from courtier.api.jsonable import json_safe

    try:
        answer = idle_figures(config)
        answer.update(await store_figures(store, config, now, None))
    except StoreError as exc:
        return 503, {"error": f"store unavailable: {exc}"}
    return 200, json_safe(answer)
