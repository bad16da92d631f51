"""Trap thresholds are settings: TOML table [traps], --trap NAME=VALUE, environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from courtier.cli.crawl_flags import config_from_args
from courtier.cli.main import build_parser
from courtier.core.config import build_config
from courtier.core.errors import ConfigError
from courtier.frontier.traps import TrapRules, trap_rules_from


def test_defaults_are_the_documented_values() -> None:
    assert trap_rules_from(()) == TrapRules()
    docs = (Path(__file__).parents[3] / "docs" / "traps.md").read_text(encoding="utf-8")
    rules = TrapRules()
    for name in ("max_url_length", "max_path_depth", "max_repeated_segment",
                 "max_query_params", "template_min_urls", "template_max_duplicate_share"):
        assert f"`{name.replace('_', '-')}` | {getattr(rules, name):g}" in docs, name


def test_flags_override_defaults() -> None:
    args = build_parser().parse_args(["crawl", "http://a.test/", "--trap", "max-path-depth=30",
                                      "--trap", "template_max_growth=none"])
    rules = trap_rules_from(config_from_args(args).traps)
    assert rules.max_path_depth == 30 and rules.template_max_growth is None


def test_toml_table(tmp_path: Path) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text("[traps]\nmax-query-params = 12\ntemplate-max-duplicate-share = 0.7\n",
                    encoding="utf-8")
    rules = trap_rules_from(build_config({}, toml, environ={}).traps)
    assert rules.max_query_params == 12 and rules.template_max_duplicate_share == 0.7


@pytest.mark.parametrize("setting", ["max-path-depth", "no-such-rule=1", "max-path-depth=x",
                                     "max-path-depth=0", "max-path-depth=none",
                                     "template-max-duplicate-share=2", "sample-rate=nan"])
def test_bad_settings_name_the_flag(setting: str) -> None:
    with pytest.raises(ConfigError, match="--trap"):
        build_config({"traps": (setting,)}, environ={})
