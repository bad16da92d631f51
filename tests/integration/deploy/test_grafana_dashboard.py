"""deploy/grafana/courtier.json: the schema, a sane grid, defined variables, parseable PromQL."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import jsonschema
import yaml

from tests.integration.deploy.artefacts import (
    DEPLOY,
    dashboard,
    dashboard_exprs,
    grafana_to_promql,
    metric_names,
)
from tests.integration.deploy.test_prometheus_rules import promtool

SCHEMA = DEPLOY / "grafana" / "dashboard.schema.json"


def test_dashboard_matches_the_schema() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(dashboard())


def test_schema_rejects_what_grafana_would_not_show() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    broken = dashboard()
    panel = next(p for p in broken["panels"] if p["type"] != "row")
    panel["gridPos"]["w"] = 30
    del panel["targets"][0]["refId"]
    assert len(list(validator.iter_errors(broken))) >= 2


def test_panels_tile_the_grid_without_overlap() -> None:
    panels = dashboard()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: dict[tuple[int, int], str] = {}
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = p["title"]


def test_variables_are_defined_and_every_query_filters_by_worker() -> None:
    board = dashboard()
    defined = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "instance"} <= defined
    for panel in board["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}"
        for target in panel["targets"]:
            used = set(re.findall(r"\$([A-Za-z]\w*)", target["expr"]))
            assert used <= defined, (panel["title"], used - defined)
            assert 'instance=~"$instance"' in target["expr"], panel["title"]


def test_dashboard_covers_rates_status_hosts_lag_and_shards() -> None:
    names = set().union(*(metric_names(e) for e in dashboard_exprs()))
    for needed in ("courtier_fetches_total", "courtier_host_queue_depth",
                   "courtier_eligible_lag_seconds_bucket", "courtier_shards_owned",
                   "courtier_durability_lag_seconds", "courtier_politeness_violations_total",
                   "courtier_fetch_ttfb_seconds_bucket", "courtier_responses_total",
                   "courtier_re_leases_total", "courtier_refetches_total",
                   "courtier_links_known_total", "courtier_parse_queue",
                   "courtier_parse_wait_seconds_bucket", "courtier_daily_budget_spent_total",
                   "courtier_host_day_caps_total",
                   "courtier_host_politeness_violations_total"):
        assert needed in names


def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": grafana_to_promql(e)}
        for i, e in enumerate(dashboard_exprs())]}]}
    path = tmp_path / "dashboard_queries.yml"
    path.write_text(yaml.safe_dump(rules))
    done = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
