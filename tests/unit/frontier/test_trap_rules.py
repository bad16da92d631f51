"""Trap rules: the stateless checks on one URL and the validation of the limits."""

from __future__ import annotations

import pytest

from courtier.core.errors import ConfigError
from courtier.core.urls import canonicalize
from courtier.frontier.trap_rules import TrapRules, static_trap_reason, trap_rules_from

H = "http://h.test"
RULES = TrapRules()


def reason(path: str, depth: int = 0, rules: TrapRules = RULES) -> str | None:
    return static_trap_reason(canonicalize(H + path), depth, rules)


def test_ordinary_urls_pass() -> None:
    for path in ["/", "/a/b/c.html", "/2026/11/03/post", "/x?a=1&b=2", "/a/b/a/b/c"]:
        assert reason(path) is None, path


def test_url_length() -> None:
    assert reason("/" + "x" * 100, rules=TrapRules(max_url_length=50)) == "url too long"
    assert reason("/" + "x" * 30, rules=TrapRules(max_url_length=50)) is None


def test_path_depth() -> None:
    deep = "".join(f"/s{i}" for i in range(25))
    assert reason(deep) == "path too deep"
    assert reason("".join(f"/s{i}" for i in range(24))) is None


def test_repeated_single_segment() -> None:
    assert reason("/a/a/a/") is None
    assert reason("/a/a/a/a/") == "repeated path segments"
    assert reason("/a/x/a/y/a/z/a") == "repeated path segments", "not only consecutive"
    assert reason("/a/a/a/a/", rules=TrapRules(max_repeated_segment=4)) is None


def test_repeating_runs() -> None:
    assert reason("/a/b/a/b/") is None
    assert reason("/a/b/a/b/a/b/") == "repeated path segments"
    assert reason("/x/a/b/c/a/b/c/a/b/c/y") == "repeated path segments"
    assert reason("/a/b/c/a/b/d/a/b/e") is None, "a run must repeat back to back"


def test_query_params() -> None:
    many = "&".join(f"p{i}=1" for i in range(31))
    assert reason("/q?" + many) == "too many query parameters"
    assert reason("/q?" + "&".join(f"p{i}=1" for i in range(30))) is None
    assert reason("/q?" + "&" * 40 + "a=1") is None, "empty parts are not parameters"


def test_link_depth() -> None:
    assert reason("/a", depth=1000) is None, "unlimited by default"
    assert reason("/a", depth=6, rules=TrapRules(max_link_depth=5)) == "link depth exceeded"
    assert reason("/a", depth=5, rules=TrapRules(max_link_depth=5)) is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_path_depth": 0},
        {"sample_rate": 1.5},
        {"template_max_duplicate_share": -0.1},
        {"sample_budget": -1},
        {"max_hosts": 0},
    ],
)
def test_invalid_rules(kwargs: dict[str, object]) -> None:
    name = next(iter(kwargs))
    with pytest.raises(ConfigError, match=name):
        TrapRules(**kwargs).validate()  # type: ignore[arg-type]


# -- limits from NAME=VALUE settings --------------------------------------------------------


def test_settings_apply_over_the_defaults_with_the_fields_types() -> None:
    rules = trap_rules_from(["max_path_depth=30", "template-max-growth=none",
                             "sample-rate = 0.25", "max-link-depth=7"])
    assert rules == TrapRules(max_path_depth=30, template_max_growth=None, sample_rate=0.25,
                              max_link_depth=7)
    assert type(rules.max_link_depth) is int and type(rules.sample_rate) is float


@pytest.mark.parametrize("setting", ["max-path-depth=1.5", "max-path-depth=none",
                                     "sample-rate=inf", "sample-rate=2", "max_hosts"])
def test_a_bad_setting_is_refused_naming_its_source(setting: str) -> None:
    with pytest.raises(ConfigError, match=r"^\[traps\]"):
        trap_rules_from([setting], source="[traps]")
