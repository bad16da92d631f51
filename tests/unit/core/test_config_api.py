"""Admin API settings: the token from the environment or a file, allowed Host names."""

from __future__ import annotations

from pathlib import Path

import pytest

from courtier.cli.crawl_flags import config_from_args
from courtier.cli.main import build_parser
from courtier.core.config import build_config
from courtier.core.errors import ConfigError


def test_token_from_environment() -> None:
    config = build_config({}, environ={"COURTIER_API_TOKEN": "from-env"})
    assert config.api_token == "from-env"


def test_token_from_a_file_flag(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("  from-file\n", encoding="utf-8")
    args = build_parser().parse_args(["crawl", "http://a.test/", "--api-token-file", str(secret)])
    config = config_from_args(args)
    assert config.api_token == "from-file"
    assert config.api_token_file is None  # read once; the token is what travels on


def test_token_file_from_toml(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("t0ken", encoding="utf-8")
    toml = tmp_path / "c.toml"
    toml.write_text(f'api-token-file = "{secret}"\napi-allowed-hosts = ["crawler.lan"]\n',
                    encoding="utf-8")
    config = build_config({}, toml, environ={})
    assert config.api_token == "t0ken" and config.api_allowed_hosts == ("crawler.lan",)


@pytest.mark.parametrize("content", [None, "", "two words"])
def test_bad_token_file_names_the_flag(tmp_path: Path, content: str | None) -> None:
    secret = tmp_path / "token"
    if content is not None:
        secret.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match="--api-token-file"):
        build_config({"api_token_file": secret}, environ={})


def test_token_and_token_file_together_are_an_error(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("x", encoding="utf-8")
    with pytest.raises(ConfigError, match="not both"):
        build_config({"api_token_file": secret}, environ={"COURTIER_API_TOKEN": "y"})


def test_allowed_hosts_flag_repeats_and_is_checked() -> None:
    args = build_parser().parse_args(["crawl", "http://a.test/", "--api-allowed-host", "a.lan",
                                      "--api-allowed-host", "b.lan:8790"])
    assert config_from_args(args).api_allowed_hosts == ("a.lan", "b.lan:8790")
    with pytest.raises(ConfigError, match="--api-allowed-host"):
        build_config({"api_allowed_hosts": ("a/b",)}, environ={})
