"""The settings model as the one source of docs/configuration.md and `courtier config`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from courtier.cli.config_commands import REGENERATE, effective, reference, show, undocumented
from courtier.cli.main import main
from courtier.core.config import FIELDS, build_config
from courtier.core.config_docs import SECTIONS, SETTING_DOCS

ROOT = Path(__file__).resolve().parents[3]


def test_every_setting_is_documented() -> None:
    assert undocumented() == [], (
        f"add an entry to SETTING_DOCS in src/courtier/core/config_docs.py for {undocumented()}, "
        f"then run `{REGENERATE}`")
    assert set(SETTING_DOCS) <= set(FIELDS), "SETTING_DOCS names settings that do not exist"
    assert all(doc.section in SECTIONS and doc.text.strip() for doc in SETTING_DOCS.values())


def test_configuration_md_is_current() -> None:
    committed = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == reference(), (
        f"docs/configuration.md is stale: regenerate it with `{REGENERATE}`")


def test_reference_lists_every_setting_with_flag_env_and_default() -> None:
    text = reference()
    for name in FIELDS:
        assert f"| `{name.replace('_', '-')}` |" in text
        assert f"`COURTIER_{name.upper()}`" in text
    assert "| `delay` | `--delay` |" in text and "`1.0`" in text
    assert "| `max-retries` | — |" in text   # settable by file/env only


def test_precedence_and_sources(tmp_path: Path) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text('delay = 3.0\nconcurrency = 10\nscope = "any"\n')
    env = {"COURTIER_CONCURRENCY": "20", "COURTIER_SCOPE": "seeds-domains"}
    config, sources = effective({"scope": "seeds-hosts", "max_pages": None}, toml, env)
    assert (config.delay, config.concurrency, config.scope) == (3.0, 20, "seeds-hosts")
    assert sources["delay"] == f"file {toml}"
    assert sources["concurrency"] == "environment COURTIER_CONCURRENCY"
    assert sources["scope"] == "flag --scope"
    assert sources["max_pages"] == "default" and config.max_pages is None
    assert config == build_config({"scope": "seeds-hosts"}, toml, env)


def test_show_masks_secrets() -> None:
    config, sources = effective(
        {"api_token": "hunter2", "store": "postgresql://crawl:pw0rd@db:5432/courtier"}, None, {})
    text = show(config, sources, as_json=False)
    assert "hunter2" not in text and "flag --api-token" in text
    assert "pw0rd" not in text and "postgresql://crawl:********@db:5432/courtier" in text
    rows = {r["setting"]: r for r in json.loads(show(config, sources, as_json=True))}
    assert rows["api-token"]["value"] == "********" and rows["delay"]["value"] == "1.0"


def test_config_show_command(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURTIER_LINGER", "5")
    toml = tmp_path / "c.toml"
    toml.write_text("delay = 4\n")
    assert main(["config", "show", "--config", str(toml), "--concurrency", "7", "--json"]) == 0
    rows = {r["setting"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["delay"] == {"setting": "delay", "value": "4.0", "source": f"file {toml}"}
    assert rows["linger"]["source"] == "environment COURTIER_LINGER"
    assert rows["concurrency"]["source"] == "flag --concurrency"


def test_config_show_bad_file_exits_2_naming_the_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text("dealy = 4\n")
    assert main(["config", "show", "--config", str(toml)]) == 2
    assert "unknown key 'dealy'" in capsys.readouterr().err


def test_example_production_toml_loads_through_the_real_loader() -> None:
    example = ROOT / "deploy" / "courtier.toml"
    config = build_config({}, example, {"COURTIER_API_TOKEN": "t"})
    assert config.continuous and config.api == "0.0.0.0:8790"
    assert config.delay >= 1.0 and config.max_in_flight_per_host == 1
    assert config.data == Path("/var/lib/courtier")


def test_config_reference_command_prints_the_reference(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "reference"]) == 0
    assert capsys.readouterr().out == reference()


def test_config_show_for_worker_keeps_an_api_address_from_the_environment(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["config", "show", "--for", "worker", "--json"]) == 0
    rows = {r["setting"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["api"] == {"setting": "api", "value": "127.0.0.1:8790",
                           "source": "courtier worker default"}
    assert rows["continuous"]["value"] == "true"
    monkeypatch.setenv("COURTIER_API", "0.0.0.0:9000")
    monkeypatch.setenv("COURTIER_API_TOKEN", "t")
    assert main(["config", "show", "--for", "worker", "--json"]) == 0
    rows = {r["setting"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["api"]["value"] == "0.0.0.0:9000"
    assert rows["api"]["source"] == "environment COURTIER_API"
