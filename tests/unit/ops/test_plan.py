"""Capacity arithmetic against the seeds' worked numbers (pure, no files)."""

from __future__ import annotations

import math

import pytest

from courtier.core.errors import ConfigError
from courtier.ops.plan import (
    CrawlShape,
    Figures,
    RefreshTier,
    parse_count,
    parse_refresh_split,
    plan,
)

FIGURES = Figures(
    measured_at="2026-12-01T00:00:00Z", source="test", cpu_seconds_per_page=0.004,
    store_bytes_per_url=500, store_bytes_per_event=300, warc_bytes_per_fetch=9000,
    warc_compression_ratio=4.0, peak_rss_mb=120,
    commit_results_per_second_per_node=50_000.0, intake_rows_per_second_per_node=100_000.0,
)
SEEDS = CrawlShape(known_urls=10e9, fetches_per_day=1e9, page_kb=200)


def test_seed_worked_numbers() -> None:
    result = plan(SEEDS, FIGURES)
    assert round(result.average_fetches_per_second) == 11_574
    assert result.peak_fetches_per_second == pytest.approx(25_000)
    assert result.body_bytes_per_day == pytest.approx(200e12)          # 200 TB/day
    assert result.average_bandwidth_bytes_per_second == pytest.approx(11_574.07 * 200e3, rel=1e-6)
    assert result.peak_bandwidth_bytes_per_second == pytest.approx(5e9)  # 40 Gbit/s


def test_refresh_split_of_the_seeds() -> None:
    result = plan(SEEDS, FIGURES)
    daily, rest = result.tiers
    assert (daily.urls, daily.days, daily.fetches_per_day) == (100e6, 1.0, 100e6)
    assert rest.urls == pytest.approx(9.9e9) and rest.days == 30
    assert rest.fetches_per_day == pytest.approx(330e6)
    assert result.refresh_fetches_per_day == pytest.approx(430e6)
    assert result.discovery_fetches_per_day == pytest.approx(570e6)
    assert result.rest_days_that_fit == pytest.approx(9.9e9 / 900e6)    # 11 days


def test_over_budget_split_is_reported_with_the_cycle_that_fits() -> None:
    shape = CrawlShape(known_urls=10e9, fetches_per_day=1e9, page_kb=200,
                       refresh=parse_refresh_split("100M:1,rest:5"))
    result = plan(shape, FIGURES)
    assert result.discovery_fetches_per_day == pytest.approx(1e9 - 100e6 - 1.98e9)
    assert result.rest_days_that_fit == pytest.approx(11.0)


def test_storage_and_retention() -> None:
    result = plan(SEEDS, FIGURES)
    # 200 KB bodies at 4x plus 1,000 B of request record and headers per fetch
    assert result.warc_bytes_per_day == pytest.approx(1e9 * (50e3 + 1e3))
    assert result.warc_bytes_retained == pytest.approx(result.warc_bytes_per_day * 90)
    assert result.url_store_bytes == pytest.approx(10e9 * 500)
    assert result.event_bytes_per_day == pytest.approx(1e9 * 300)
    # the outbox and the audit log are kept for their retentions (7 and 90 days by
    # default, as the crawl's --events-retention and --audit-retention) and today
    assert result.event_bytes_retained == pytest.approx(1e9 * 300 * 8)
    assert result.audit_bytes_per_day == pytest.approx(1e9 * 145)
    assert result.audit_bytes_retained == pytest.approx(1e9 * 145 * 91)
    shorter = plan(CrawlShape(10e9, 1e9, 200, events_retention=86_400.0,
                              audit_retention=9 * 86_400.0), FIGURES)
    assert shorter.event_bytes_retained == pytest.approx(1e9 * 300 * 2)
    assert shorter.audit_bytes_retained == pytest.approx(1e9 * 145 * 10)


def test_workers_cores_and_postgres_nodes() -> None:
    result = plan(SEEDS, FIGURES)
    # 25,000 fetches/s x 4 ms of CPU = 100 cores busy, at 75 % each
    assert result.cores == math.ceil(100 / 0.75) == result.workers
    assert result.machines == math.ceil(134 / 32)
    # one commit result per fetch at peak; the new URLs' intake at the same peak factor
    assert result.commits_per_second_peak == pytest.approx(25_000)
    assert result.new_urls_per_second_peak == pytest.approx(570e6 / 86_400 * 2.16)
    # 25,000 / 50,000 + 14,250 / 100,000 of one node
    assert result.pg_nodes_for_writes == 1 and result.store_rates_measured
    # 5 TB of URL rows + 8 days x 300 GB of events + 91 days x 145 GB of audit rows
    # = 20.6 TB at 4 TB a node
    assert result.pg_nodes_for_storage == 6 == result.pg_nodes


def test_write_nodes_share_a_node_between_commits_and_intake() -> None:
    slow = Figures(**{**{f: getattr(FIGURES, f) for f in FIGURES.__slots__},
                      "commit_results_per_second_per_node": 2_000.0,
                      "intake_rows_per_second_per_node": 10_000.0})
    # 25,000 commits/s at 2,000 a node = 12.5 nodes' time, 14,250 new URLs/s at 10,000
    # a node = 1.425: 13.925 nodes, so 14
    result = plan(SEEDS, slow)
    assert result.pg_nodes_for_writes == 14 == result.pg_nodes and result.store_rates_measured
    given = plan(CrawlShape(10e9, 1e9, 200, commit_results_per_second=25_000.0,
                            intake_rows_per_second=1_500.0), slow)
    assert given.pg_nodes_for_writes == 11 and not given.store_rates_measured


def test_no_assumed_write_rate_when_the_figures_have_none() -> None:
    bare = Figures(**{**{f: getattr(FIGURES, f) for f in FIGURES.__slots__},
                      "intake_rows_per_second_per_node": None})
    with pytest.raises(ConfigError, match=r"intake_rows_per_second_per_node.*store_bench\.py"):
        plan(SEEDS, bare)
    with pytest.raises(ConfigError, match="--commit-results-per-second"):
        plan(CrawlShape(1e6, 1e6, 10, commit_results_per_second=0.0), FIGURES)


def test_cores_scale_with_the_measured_cpu_per_page() -> None:
    cheap = Figures(**{**{f: getattr(FIGURES, f) for f in FIGURES.__slots__},
                       "cpu_seconds_per_page": 0.002})
    assert plan(SEEDS, cheap).cores == math.ceil(50 / 0.75)


@pytest.mark.parametrize(("text", "value"), [
    ("10e9", 10e9), ("1e9", 1e9), ("100M", 100e6), ("1.5B", 1.5e9), ("250k", 250e3),
    ("1_000", 1000.0), ("7", 7.0),
])
def test_parse_count(text: str, value: float) -> None:
    assert parse_count(text, "--known-urls") == value


@pytest.mark.parametrize("text", ["", "ten", "1e", "-5", "5X"])
def test_parse_count_rejects_and_names_the_flag(text: str) -> None:
    with pytest.raises(ConfigError, match="--known-urls"):
        parse_count(text, "--known-urls")


def test_parse_refresh_split() -> None:
    assert parse_refresh_split("100M:1,rest:30d") == (RefreshTier(100e6, 1.0),
                                                      RefreshTier(None, 30.0))
    for bad in ("100M", "100M:0", "rest:1,rest:2", "100M:x"):
        with pytest.raises(ConfigError, match="--refresh-split"):
            parse_refresh_split(bad)


def test_bad_shapes_name_the_flag() -> None:
    with pytest.raises(ConfigError, match="--refresh-split"):
        plan(CrawlShape(1e6, 1e6, 10, refresh=parse_refresh_split("2M:1")), FIGURES)
    with pytest.raises(ConfigError, match="--peak-factor"):
        plan(CrawlShape(1e6, 1e6, 10, peak_factor=0.5), FIGURES)
    with pytest.raises(ConfigError, match="--page-kb"):
        plan(CrawlShape(1e6, 1e6, 0), FIGURES)
    with pytest.raises(ConfigError, match="--events-retention"):
        plan(CrawlShape(1e6, 1e6, 10, events_retention=0), FIGURES)
