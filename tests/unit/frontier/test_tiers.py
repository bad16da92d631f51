"""Tier specs, TOML tables and how a URL gets its tier."""

from __future__ import annotations

import pytest

from courtier.core.errors import ConfigError
from courtier.frontier.recrawl import DAY, RecrawlPolicy
from courtier.frontier.tiers import (
    DEFAULT_TIER,
    HOST_TIER,
    Tier,
    TierSet,
    parse_tier,
    tier_specs_from_toml,
)
from courtier.store.base import HostTierRecord

SPECS = ("hot min=300 max=3600 url=^https?://news\\.", "daily min=86400 max=86400 value=5",
         "gold min=3600 max=86400 value=20")


def test_parse_tier_reads_bounds_start_value_and_patterns() -> None:
    tier = parse_tier("hot min=300 max=3600 start=600 value=8 url=^a url=b$")
    assert (tier.name, tier.min_interval, tier.max_interval, tier.start) == ("hot", 300, 3600,
                                                                               600)
    assert tier.min_value == 8 and tier.url_patterns == ("^a", "b$")


@pytest.mark.parametrize("spec", ["", "hot", "hot min=5", "hot min=10 max=5", "Hot min=1 max=2",
                                  "hot min=1 max=2 speed=3", "hot min=x max=2",
                                  "hot min=1 max=2 url=(", "hot min=1 max=9 start=20"])
def test_bad_tier_specs_are_refused(spec: str) -> None:
    with pytest.raises(ConfigError):
        parse_tier(spec)


def test_assignment_order_host_then_pattern_then_value_then_default() -> None:
    tiers = TierSet.from_specs(SPECS, DAY)
    assert tiers.assign("http://news.example/a", 0.1).name == "hot"
    assert tiers.assign("http://other.example/a", 25.0).name == "gold"  # highest threshold
    assert tiers.assign("http://other.example/a", 6.0).name == "daily"
    assert tiers.assign("http://other.example/a", 1.0).name == DEFAULT_TIER
    host = HostTierRecord("http://other.example", tier="hot")
    assert tiers.assign("http://other.example/a", 25.0, host).name == "hot"


def test_host_bounds_narrow_or_replace_the_tier() -> None:
    tiers = TierSet.from_specs(SPECS, DAY)
    both = tiers.assign("http://x.example/", 1.0,
                        HostTierRecord("http://x.example", min_interval=60, max_interval=600))
    assert (both.name, both.min_interval, both.max_interval) == (HOST_TIER, 60, 600)
    narrowed = tiers.assign("http://x.example/", 1.0,
                            HostTierRecord("http://x.example", tier="hot", max_interval=900))
    assert (narrowed.name, narrowed.min_interval, narrowed.max_interval) == ("hot", 300, 900)
    only_factor = HostTierRecord("http://x.example", value_factor=3.0)
    assert tiers.assign("http://x.example/", 1.0, only_factor).name == DEFAULT_TIER


def test_default_tier_follows_recrawl_interval_and_can_be_replaced() -> None:
    tiers = TierSet.from_specs((), 3600.0)
    assert (tiers.default.min_interval, tiers.default.max_interval) == (3600.0, 30 * DAY)
    own = TierSet.from_specs(("default min=600 max=7200",), DAY)
    assert own.default.max_interval == 7200 and own.names() == [DEFAULT_TIER]
    with pytest.raises(ConfigError, match="unknown tier"):
        own.check_name("hot")
    with pytest.raises(ConfigError, match="unique"):
        TierSet.from_specs(("a min=1 max=2", "a min=1 max=3"), DAY)


def test_tier_policy_puts_the_estimator_inside_the_bounds() -> None:
    tier = parse_tier("hot min=300 max=3600")
    policy = tier.policy(RecrawlPolicy())
    assert (policy.min_interval, policy.default_interval, policy.max_interval) == (300, 300,
                                                                                   3600)
    assert policy.clamp(10.0) == 300 and policy.clamp(10 * DAY) == 3600


def test_toml_tables_become_specs() -> None:
    table = {"hot": {"min-interval": 300, "max-interval": 3600, "urls": ["^https://n\\."]},
             "gold": {"min_interval": 3600, "max-interval": 86400, "min-value": 20}}
    specs = tier_specs_from_toml(table, "f.toml")
    tiers = [parse_tier(s) for s in specs]
    assert tiers[0].url_patterns == ("^https://n\\.",) and tiers[1].min_value == 20
    with pytest.raises(ConfigError, match="unknown key"):
        tier_specs_from_toml({"hot": {"speed": 1}}, "f.toml")
    with pytest.raises(ConfigError, match="spaces"):
        tier_specs_from_toml({"hot": {"min-interval": 1, "max-interval": 2,
                                      "urls": ["a b"]}}, "f.toml")


def test_the_planner_remembers_a_tiers_policy_only_while_tier_and_base_stay() -> None:
    """``RefreshPlanner.tier_policy`` is ``tier.policy(base)``: made once per tier, made
    again when the tier under that name or the base policy is replaced. Broken once by
    keying the memo on the tier's name alone: red at the replaced tier (the old policy
    came back)."""
    from courtier.frontier.refresh import RefreshPlanner

    hot = Tier("hot", min_interval=60.0, max_interval=3600.0)
    planner = RefreshPlanner(TierSet([hot], Tier("default", DAY, 30 * DAY)), RecrawlPolicy())
    first = planner.tier_policy(hot)
    assert first == hot.policy(RecrawlPolicy()) and first.min_interval == 60.0
    assert planner.tier_policy(hot) is first  # remembered
    hotter = Tier("hot", min_interval=30.0, max_interval=600.0)
    assert planner.tier_policy(hotter) == hotter.policy(RecrawlPolicy())
    planner.policy = RecrawlPolicy(retry_base=5.0)
    assert planner.tier_policy(hotter).retry_base == 5.0
