"""The day limits' triggers in the metrics: the daily budget beginning to hold fetches back,
a host reaching its pages-per-day cap."""

from __future__ import annotations

from courtier.core.clock import VirtualClock
from courtier.core.config import build_config
from courtier.core.records import DAY
from courtier.crawl.day_limits import DayLimits
from courtier.crawl.metrics import CrawlMetrics
from courtier.frontier.host import HostState
from courtier.frontier.scheduler import Frontier
from courtier.store.memory import MemoryStore


def _day_limits(metrics: CrawlMetrics, clock: VirtualClock, budget: int | None) -> DayLimits:
    config = build_config({"daily_budget": budget, "continuous": True}, environ={})
    return DayLimits(config, MemoryStore(), Frontier(clock, "courtier"), lambda _: None,
                     metrics, lambda: 1.0)


def test_the_daily_budget_counts_each_time_it_begins_holding_fetches_back() -> None:
    clock, metrics = VirtualClock(), CrawlMetrics()
    limits = _day_limits(metrics, clock, budget=48)  # 2 at once, then one per 30 minutes
    host = HostState("https://a.test", shard=1)

    def spent() -> float | None:
        return metrics.registry.get_sample_value("courtier_daily_budget_spent_total")

    now = clock.now()
    for _ in range(2):
        assert limits.allows(now)
        limits.count_page(now, host)
    assert spent() == 0
    assert not limits.allows(now) and not limits.allows(now + 60)
    assert spent() == 1  # once for the whole hold, not once a turn
    assert limits.allows(now + 1800)
    limits.count_page(now + 1800, host)
    assert not limits.allows(now + 1801)
    assert spent() == 2


def test_a_host_reaching_its_day_cap_is_counted_once() -> None:
    clock, metrics = VirtualClock(), CrawlMetrics()
    limits = _day_limits(metrics, clock, budget=None)
    host = HostState("https://a.test", shard=1)
    host.policy.max_pages = 3
    now = clock.now()
    host.day_start = now
    for pages in range(1, 6):  # the frontier counts a lease first, then the worker
        host.day_pages = pages
        limits.count_page(now, host)
    assert metrics.registry.get_sample_value("courtier_host_day_caps_total") == 1
    host.day_start, host.day_pages = now + DAY, 3  # the next day's cap
    limits.count_page(now + DAY, host)
    assert metrics.registry.get_sample_value("courtier_host_day_caps_total") == 2
