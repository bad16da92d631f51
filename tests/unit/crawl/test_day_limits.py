"""The day limits: the daily budget's day begins once a shard is held (full only on an
empty window) and paces this worker's share of the shards; the triggers in the metrics (the
daily budget beginning to hold fetches back, a host reaching its pages-per-day cap)."""

from __future__ import annotations

from collections.abc import Callable

from courtier.core.clock import VirtualClock
from courtier.core.config import build_config
from courtier.core.records import DAY
from courtier.crawl.day_limits import DayLimits
from courtier.crawl.metrics import CrawlMetrics
from courtier.frontier.host import HostState
from courtier.frontier.scheduler import Frontier
from courtier.store.base import DAILY_BUDGET_KEY
from courtier.store.cluster import DayReservation
from courtier.store.memory import MemoryStore

PER_DAY = 720  # one hour's share: 30


def _starts(limits: DayLimits, now: float, host: HostState) -> int:
    n = 0
    while limits.allows(now):
        limits.count_page(now, host)
        n += 1
    return n


async def test_the_day_begins_once_a_shard_is_held_full_on_an_empty_window() -> None:
    """Seen red with ``begin`` ignoring the stored window (the worker that gains its half
    after the other's 30 requests were counted starts 15: 45 in the first hour) and with
    the day begun with no shard held (as ``restore`` did at the start of ``Worker.run``:
    a bucket of no room, so the first holder of every shard starts 0, not 30)."""
    clock, store = VirtualClock(), MemoryStore()
    held = [0.0, 0.0]
    first = _day_limits(CrawlMetrics(), clock, PER_DAY, lambda: held[0], store)
    second = _day_limits(CrawlMetrics(), clock, PER_DAY, lambda: held[1], store)
    host = HostState("https://a.test", shard=1)
    now = clock.now()
    await first.begin(now)
    await second.begin(now)
    assert not first.allows(now) and not second.allows(now)  # no shard: nothing starts
    held[0] = 1.0  # the first holds every shard: an empty window, its bucket full
    await first.begin(now)
    assert _starts(first, now, host) == 30
    await first.write_ahead()  # its counts are in the store before its requests
    held[0], held[1] = 0.5, 0.5  # half handed over after those requests
    await second.begin(now)
    assert _starts(first, now, host) + _starts(second, now, host) == 0


async def test_a_day_begun_on_an_empty_window_is_full_at_the_share_held() -> None:
    clock, store = VirtualClock(), MemoryStore()
    limits = _day_limits(CrawlMetrics(), clock, PER_DAY, lambda: 0.5, store)
    host = HostState("https://a.test", shard=1)
    await limits.begin(clock.now())
    assert _starts(limits, clock.now(), host) == 15


async def test_a_day_begun_on_a_stored_window_starts_empty_and_keeps_its_count() -> None:
    clock, store = VirtualClock(), MemoryStore()
    now = clock.now()
    await store.reserve_day_counts([DayReservation(DAILY_BUDGET_KEY, now - 60, 5)])
    held = [1.0]
    limits = _day_limits(CrawlMetrics(), clock, PER_DAY, lambda: held[0], store)
    host = HostState("https://a.test", shard=1)
    await limits.begin(now)
    assert _starts(limits, now, host) == 0
    assert _starts(limits, now + 120, host) == 1  # one fetch every 120 s at the whole share
    held[0] = 0.5  # half the shards: half the rate
    assert _starts(limits, now + 239, host) == 0
    assert _starts(limits, now + 361, host) == 1


def _day_limits(metrics: CrawlMetrics, clock: VirtualClock, budget: int | None,
                share: Callable[[], float] = lambda: 1.0,
                store: MemoryStore | None = None) -> DayLimits:
    config = build_config({"daily_budget": budget, "continuous": True}, environ={})
    return DayLimits(config, store or MemoryStore(), Frontier(clock, "courtier"),
                     lambda _: None, metrics, share)


async def test_the_daily_budget_counts_each_time_it_begins_holding_fetches_back() -> None:
    clock, metrics = VirtualClock(), CrawlMetrics()
    limits = _day_limits(metrics, clock, budget=48)  # 2 at once, then one per 30 minutes
    host = HostState("https://a.test", shard=1)

    def spent() -> float | None:
        return metrics.registry.get_sample_value("courtier_daily_budget_spent_total")

    now = clock.now()
    await limits.begin(now)
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
