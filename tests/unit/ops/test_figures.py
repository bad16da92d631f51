"""The figures file as `courtier plan` reads it, and the plan's arithmetic from it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from courtier.core.errors import ConfigError
from courtier.ops.figures import load_figures
from courtier.ops.plan import CrawlShape, plan

#: a figures file as the two benches write it: the crawl's (crawl_vs_scrapy.py) and a
#: database node's write rates (store_bench.py --citus)
FILE = {
    "measured_at": "2026-12-06T18:00:00Z", "command": "bench/crawl_vs_scrapy.py",
    "cpu_seconds_per_page": 0.004, "store_bytes_per_url": 400, "store_bytes_per_event": 300,
    "store_bytes_per_fetch_log_row": 150, "warc_bytes_per_fetch": 9000,
    "warc_compression_ratio": 3.0, "peak_rss_mb": 100,
    "commit_results_per_second_per_node": 800, "intake_rows_per_second_per_node": 2_500,
}


def _write(tmp_path: Path, content: dict[str, object]) -> Path:
    path = tmp_path / "figures.json"
    path.write_text(json.dumps(content))
    return path


def test_plan_from_a_figures_file_takes_every_rate_and_size_from_it(tmp_path: Path) -> None:
    """Red when plan used any rate other than the file's (e.g. the old assumed 100 k rows/s
    a node gave 1 write node here) or ignored the file's audit row bytes."""
    figures, _ = load_figures(_write(tmp_path, FILE))
    result = plan(CrawlShape(known_urls=10e9, fetches_per_day=1e9, page_kb=200), figures)
    # peak 25,000 fetches/s: 25,000 / 800 = 31.25 nodes' commits; new URLs 570e6 a day
    # (1e9 less the refresh split's 430e6) at the peak factor = 14,250/s / 2,500 = 5.7
    assert result.commit_results_per_second_per_node == 800
    assert result.intake_rows_per_second_per_node == 2_500
    assert result.pg_nodes_for_writes == math.ceil(25_000 / 800 + 14_250 / 2_500) == 37
    assert result.store_rates_measured
    # the audit log at the file's 150 B a row: 91 days of 1e9 rows
    assert result.audit_bytes_retained == pytest.approx(1e9 * 150 * 91)
    # 10e9 x 400 B + 8 x 300 GB + 91 x 150 GB = 20.05 TB: 6 nodes of 4 TB; writes need more
    assert result.pg_nodes_for_storage == 6 and result.pg_nodes == 37
    assert result.cores == math.ceil(25_000 * 0.004 / 0.75)


def test_a_figures_file_without_write_rates_is_refused_by_plan(tmp_path: Path) -> None:
    crawl_only = {k: v for k, v in FILE.items() if "per_node" not in k}
    figures, _ = load_figures(_write(tmp_path, crawl_only))
    with pytest.raises(ConfigError, match=r"store_bench\.py --citus --figures-out"):
        plan(CrawlShape(known_urls=10e9, fetches_per_day=1e9, page_kb=200), figures)


def test_a_write_rate_that_is_not_a_number_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, {**FILE, "commit_results_per_second_per_node": "fast"})
    with pytest.raises(ConfigError, match="every figure must be a number"):
        load_figures(path)


def test_the_database_store_bytes_replace_the_crawls_sqlite_bytes(tmp_path: Path) -> None:
    """cluster_bench.py --figures-out adds the bytes a PostgreSQL or Citus store kept after
    a crawl; the plan sizes the database nodes by them, not by the SQLite crawl's. Red
    when the loader ignored ``database_store``."""
    measured = {**FILE, "database_store": {
        "store": "Citus", "bytes_per_url": 1_200, "bytes_per_event": 900,
        "bytes_per_audit_row": 250}}
    figures, _ = load_figures(_write(tmp_path, measured))
    assert (figures.store_bytes_per_url, figures.store_bytes_per_event,
            figures.store_bytes_per_audit_row) == (1_200, 900, 250)
    result = plan(CrawlShape(known_urls=10e9, fetches_per_day=1e9, page_kb=200), figures)
    assert result.url_store_bytes == pytest.approx(10e9 * 1_200)
    assert result.audit_bytes_retained == pytest.approx(1e9 * 250 * 91)
    # 12 TB + 8 x 900 GB + 91 x 250 GB = 41.95 TB: 11 nodes of 4 TB
    assert result.pg_nodes_for_storage == 11


def test_a_database_store_that_is_not_an_object_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, {**FILE, "database_store": 1200})
    with pytest.raises(ConfigError, match="database_store must be a JSON object"):
        load_figures(path)
