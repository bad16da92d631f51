"""The default value derivation and values given from outside."""

from __future__ import annotations

import math

import pytest

from courtier.core.errors import ConfigError
from courtier.frontier.value import (
    NON_CANONICAL_FACTOR,
    default_value,
    effective_value,
    parse_value,
)


def test_seeds_are_worth_more_than_links_and_depth_lowers_value() -> None:
    seed = default_value(depth=0, priority=10)
    link = default_value(depth=1, priority=0)
    deep = default_value(depth=10, priority=0)
    assert seed == pytest.approx(2.0)
    assert link == pytest.approx(0.8)
    assert seed > link > deep > 0
    assert default_value(depth=100, priority=0) == pytest.approx(0.05)  # floored


def test_in_links_and_host_factor_raise_the_value() -> None:
    base = default_value(1, 0)
    assert default_value(1, 0, inlinks=15) == pytest.approx(2 * base)
    assert default_value(1, 0, host_factor=3.0) == pytest.approx(3 * base)
    assert default_value(1, 0, host_factor=0.0) == 0.0


def test_non_canonical_members_are_planned_with_a_lower_value() -> None:
    assert effective_value(4.0, non_canonical=True) == 4.0 * NON_CANONICAL_FACTOR
    assert effective_value(4.0, non_canonical=False) == 4.0


@pytest.mark.parametrize("text", ["-1", "nan", "inf", "1e7", "abc", True, None])
def test_bad_values_are_refused_with_their_place(text: object) -> None:
    with pytest.raises(ConfigError, match=r"file\.tsv:3"):
        parse_value(text, "file.tsv:3")


def test_good_values_parse() -> None:
    assert parse_value("2.5", "x") == 2.5
    assert parse_value(0, "x") == 0.0
    assert math.isclose(parse_value("1e6", "x"), 1e6)
