"""The deploy/ artefacts as data: dashboard queries, alert rules, the metric names they use."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "courtier.json"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
# Series Prometheus itself makes about a scrape target (not exported by courtier)
PROMETHEUS_OWN = frozenset({"up"})
_NAME = re.compile(r"\b(courtier_[a-z0-9_]+|up)\b(?!\s*\()")
_LABEL_SET = re.compile(r"\{[^}]*\}")
_GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def dashboard_exprs() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"]]


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (label values and functions excluded)."""
    return set(_NAME.findall(_LABEL_SET.sub("", expr)))


def grafana_to_promql(expr: str) -> str:
    """A dashboard query with Grafana's variables replaced, so promtool can parse it."""
    for name, value in _GRAFANA_VARS.items():
        expr = expr.replace(name, value)
    return re.sub(r"\$[A-Za-z_]+", ".*", expr)
