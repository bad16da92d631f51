"""Scrape-time gauges: the busiest hosts only (bounded labels), shards owned, spool space."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from courtier.core.clock import RealClock
from courtier.core.tracking import TrackingParams
from courtier.core.urls import canonicalize
from courtier.crawl.metrics import TOP_HOSTS, CrawlMetrics
from courtier.frontier.host import HostState
from courtier.frontier.scheduler import Frontier


def test_host_queue_depth_reports_only_the_busiest_hosts(tmp_path: Path) -> None:
    frontier = Frontier(RealClock(), "courtier", epochs={3: 1, 7: 2})
    for i in range(TOP_HOSTS + 5):
        host = HostState(f"https://h{i}.test", shard=3)
        host.queue = [Any] * i  # type: ignore[list-item]  # only the length is read
        frontier.hosts[host.host_key] = host
    metrics = CrawlMetrics()
    metrics.bind_frontier(frontier, RealClock())
    metrics.bind_spool(tmp_path)
    samples = {s.labels["host"]: s.value for f in metrics.registry.collect()
               if f.name == "courtier_host_queue_depth" for s in f.samples}
    assert len(samples) == TOP_HOSTS
    assert min(samples.values()) == 5 and samples["https://h14.test"] == 14
    assert metrics.registry.get_sample_value("courtier_shards_owned") == 2
    free = metrics.registry.get_sample_value("courtier_spool_free_bytes")
    size = metrics.registry.get_sample_value("courtier_spool_size_bytes")
    assert free is not None and size is not None and 0 < free <= size


def test_spool_gauges_are_absent_for_a_missing_directory(tmp_path: Path) -> None:
    metrics = CrawlMetrics()
    metrics.bind_spool(tmp_path / "not-there")
    assert metrics.registry.get_sample_value("courtier_spool_free_bytes") is None


def test_tracking_removals_are_read_from_the_intake_s_count_at_each_scrape() -> None:
    """``courtier_tracking_params_removed_total`` is the count of the ``TrackingParams``
    the intake cleans with, read at each scrape (issue 31's counter). Seen red with the
    collector reporting a copy taken at binding (0.0 after two removals)."""
    metrics, tracking = CrawlMetrics(), TrackingParams()
    metrics.bind_tracking(tracking)
    assert b"courtier_tracking_params_removed_total 0.0" in metrics.render()
    tracking.clean(canonicalize("http://a.test/p?utm_source=x&fbclid=y&id=1"))
    assert b"courtier_tracking_params_removed_total 2.0" in metrics.render()
