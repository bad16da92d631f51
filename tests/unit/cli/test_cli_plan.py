"""`courtier plan` on the command line: the table, --json, the figures file and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from courtier.cli.main import main
from courtier.ops.figures import REQUIRED, load_figures, shipped_text

SEEDS = ["plan", "--known-urls", "10e9", "--fetches-per-day", "1e9", "--page-kb", "200"]


def test_table_names_the_seed_figures_and_the_measurement(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(SEEDS) == 0
    out = capsys.readouterr().out
    assert "11,574 /s" in out and "25,000 /s" in out and "200 TB / day" in out
    shipped = json.loads(shipped_text())
    assert f"measured {shipped['measured_at']}" in out
    assert "rest (9,900,000,000 URLs) every 30 d" in out


def test_json_uses_the_given_figures_file(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    figures = json.loads(shipped_text()) | {"cpu_seconds_per_page": 0.01,
                                            "measured_at": "2030-01-02T03:04:05Z"}
    path = tmp_path / "figures.json"
    path.write_text(json.dumps(figures))
    assert main([*SEEDS, "--figures", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["figures"]["measured_at"] == "2030-01-02T03:04:05Z"
    assert out["plan"]["cores"] == 334            # 25,000/s x 10 ms / 0.75
    assert round(out["plan"]["average_fetches_per_second"]) == 11_574


def test_shipped_figures_are_complete_and_measured() -> None:
    figures, raw = load_figures(None)
    assert all(k in raw for k in REQUIRED) and raw["pages"] > 0
    assert 0 < figures.cpu_seconds_per_page < 1
    # a database node's write rates, measured on Citus (store_bench.py --citus)
    assert (figures.commit_results_per_second_per_node or 0) > 0
    assert (figures.intake_rows_per_second_per_node or 0) > 0
    assert raw["store_nodes"]["citus_worker_nodes"] >= 1


def test_table_says_the_write_rates_are_measured(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(SEEDS) == 0
    out = capsys.readouterr().out
    assert "intake rows/s a node, measured" in out and "bench/store_bench.py --citus" in out
    assert main([*SEEDS, "--commit-results-per-second", "1000",
                 "--intake-rows-per-second", "2000"]) == 0
    # 25,000 / 1,000 + 14,250 / 2,000 = 32.1 nodes' time
    assert "writes 33 at 1,000 commit results/s and 2,000 intake rows/s a node, given" in \
        capsys.readouterr().out


@pytest.mark.parametrize(("content", "message"), [
    ("{", "invalid JSON at line 1"),
    ('{"measured_at": "x"}', "missing cpu_seconds_per_page"),
    ("[1]", "expected a JSON object"),
])
def test_bad_figures_file_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            content: str, message: str) -> None:
    path = tmp_path / "f.json"
    path.write_text(content)
    assert main([*SEEDS, "--figures", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"--figures {path}" in err and message in err


def test_bad_count_exits_2_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--known-urls", "lots", "--fetches-per-day", "1e9",
                 "--page-kb", "200"]) == 2
    assert "--known-urls 'lots'" in capsys.readouterr().err


def test_table_says_which_stores_bytes_the_plan_used(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """With a database's bytes in the file the table names them as the plan's, and the
    URL rows are sized by them (10e9 URLs x 2,000 B = 20 TB)."""
    figures = json.loads(shipped_text()) | {"database_store": {
        "store": "Citus", "bytes_per_url": 2_000, "bytes_per_event": 700,
        "bytes_per_audit_row": 300, "measured_at": "2030-01-02T03:04:05Z",
        "command": "bench/cluster_bench.py --citus --figures-out"}}
    path = tmp_path / "figures.json"
    path.write_text(json.dumps(figures))
    assert main([*SEEDS, "--figures", str(path)]) == 0
    out = capsys.readouterr().out
    assert "store on Citus, used by the plan: 2000 B per URL" in out
    assert "store: URL rows" in out and "20 TB" in out.split("store: URL rows")[1].split("\n")[0]
