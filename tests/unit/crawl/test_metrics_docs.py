"""Every metric courtier registers has help text and a runbook entry in docs/operations.md."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from courtier.core.clock import RealClock
from courtier.core.tracking import TrackingParams
from courtier.crawl.metrics import CrawlMetrics
from courtier.frontier.scheduler import Frontier

ROOT = Path(__file__).resolve().parents[3]
RUNBOOK = ROOT / "docs" / "operations.md"


def exposition_names(tmp: Path) -> dict[str, str]:
    """Every metric of a fully bound registry: its exposed name → its help text."""
    metrics = CrawlMetrics()
    metrics.bind_frontier(Frontier(RealClock(), "courtier"), RealClock())
    metrics.bind_spool(tmp)
    metrics.bind_tracking(TrackingParams())
    out = {}
    for family in metrics.registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        out[name] = family.documentation
    return out


def runbook_entries() -> dict[str, str]:
    """Metric heading → the text of its section."""
    text = RUNBOOK.read_text(encoding="utf-8")
    parts = re.split(r"^#### (\S+)\n", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_registered_metric_has_help_and_a_runbook_entry(tmp_path: Path) -> None:
    names = exposition_names(tmp_path)
    assert "courtier_fetches_total" in names and "courtier_spool_free_bytes" in names
    entries = runbook_entries()
    for name, help_text in names.items():
        assert help_text.strip(), f"{name} has no help text"
        assert name in entries, f"{name} has no '#### {name}' entry in docs/operations.md"
        assert "**Action:**" in entries[name], f"{name}: the runbook entry says no action"


def test_every_alert_links_to_an_existing_runbook_anchor() -> None:
    rules = yaml.safe_load((ROOT / "deploy/prometheus/alerts.yml").read_text())["groups"]
    headings = set(runbook_entries()) | {"alerts"}
    for rule in (r for g in rules for r in g["rules"] if "alert" in r):
        link = rule["annotations"]["runbook"]
        assert link.startswith("docs/operations.md#"), rule["alert"]
        assert link.split("#", 1)[1] in headings, f"{rule['alert']}: {link} has no heading"
