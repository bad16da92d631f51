"""Every metric the dashboard and the alerts name is exported by a real crawl's /metrics."""

from __future__ import annotations

import asyncio
import time
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

# Metrics added on other branches at the same time as this one, with these exact names.
# The coordinator removes each entry when the branch that exports it is merged.
PENDING_FROM_OTHER_BRANCHES = frozenset({
    "courtier_event_loop_lag_seconds",        # gauge, from the performance/hardening branch
    "courtier_warc_upload_backlog_segments",  # gauge, from the archive branch
})
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
    spec = default_web(n_hosts=3, pages_per_host=6, crawl_delay=0.1)
    async with live_crawl(spec, tmp) as crawl, aiohttp.ClientSession() as session:
        start = time.monotonic()
        while crawl.worker.status.fetched < 4:
            assert time.monotonic() - start < 30, "the crawl fetched nothing"
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
               if n not in exported and n not in PENDING_FROM_OTHER_BRANCHES
               and n not in PROMETHEUS_OWN}
    assert not missing, f"named but not exported by courtier: {missing}"
    # a pending name that is exported now should leave the list (merge-time reminder)
    arrived = PENDING_FROM_OTHER_BRANCHES & exported
    assert not arrived, f"remove {sorted(arrived)} from PENDING_FROM_OTHER_BRANCHES"
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert all(f.documentation.strip() for f in families.values()), "a metric lacks help text"
    assert families["courtier_spool_free_bytes"].samples[0].value > 0
    assert families["courtier_shards_owned"].samples[0].value > 0
