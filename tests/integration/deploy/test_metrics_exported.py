"""Every metric the dashboard and the alerts name is exported by a real crawl's /metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from courtier.testweb import default_web
from tests.integration.api.crawl_harness import live_crawl
from tests.integration.deploy.artefacts import (
    PROMETHEUS_OWN,
    alert_rules,
    dashboard_exprs,
    metric_names,
)

_SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count"),
             "gauge": ("",)}


def referenced() -> dict[str, str]:
    """Metric name → where it is used (first use)."""
    names: dict[str, str] = {}
    for expr in dashboard_exprs():
        for name in metric_names(expr):
            names.setdefault(name, "deploy/grafana/courtier.json")
    for rule in alert_rules():
        for name in metric_names(rule["expr"]):
            names.setdefault(name, f"alerts.yml {rule.get('alert') or rule.get('record')}")
    return names


def exported_names(text: str) -> set[str]:
    """Series names /metrics exports or declares (a labelled counter with no child yet
    still declares its family, so its _total name counts as exported)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.update(s.name for s in family.samples)
        names.update(family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",)))
    return names


async def scrape_real_crawl(tmp: Path) -> str:
    """/metrics of a crawl that has fetched 4 pages.

    Waits for the fetches themselves, not for a wall-clock bound: the crawl has no
    ``--max-seconds`` (a continuous crawl runs until stopped), so on a busy machine it
    just takes longer; a crawl that ends before 4 fetches fails at once, and one that
    hangs is the test timeout's. Seen red on a scratch copy with a crawl that ends
    (``continuous=False``) waited on for 400 fetches: "the crawl ended after 70 fetches"."""
    spec = default_web(n_hosts=3, pages_per_host=6, crawl_delay=0.1)
    async with (live_crawl(spec, tmp, max_seconds=None) as crawl,
                aiohttp.ClientSession() as session):
        while crawl.worker.status.fetched < 4:
            assert not crawl.task.done(), (
                f"the crawl ended after {crawl.worker.status.fetched} fetches")
            await asyncio.sleep(0.05)
        async with session.get(crawl.api_url + "/metrics") as response:
            assert response.status == 200
            return await response.text()


@pytest.mark.timeout(90)
async def test_dashboard_and_alert_metrics_are_exported(tmp_path: Path) -> None:
    text = await scrape_real_crawl(tmp_path)
    exported = exported_names(text)
    wanted = referenced()
    assert "courtier_fetches_total" in wanted and "courtier_spool_free_bytes" in wanted
    missing = {n: where for n, where in wanted.items()
               if n not in exported and n not in PROMETHEUS_OWN}
    assert not missing, f"named but not exported by courtier: {missing}"
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert all(f.documentation.strip() for f in families.values()), "a metric lacks help text"
    assert families["courtier_spool_free_bytes"].samples[0].value > 0
    assert families["courtier_shards_owned"].samples[0].value > 0
