"""Admin API of the refresh plan: URL values, per-host freshness overrides, tier budgets.

``PUT /v1/urls/values`` sets values from outside (``courtier url import-values`` sends
its file here in batches); ``GET/PUT/DELETE /v1/domains/{domain}/freshness`` is the
host override ``policy set HOST --tier/--min-interval/--max-interval/--value`` writes;
``GET /v1/stats`` carries the per-tier budget (:meth:`FreshnessControl.tier_budget`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from courtier.api.crawl_figures import tier_budget
from courtier.api.views import ApiInputError, host_keys_for
from courtier.core.clock import Clock
from courtier.core.config import CrawlConfig
from courtier.core.errors import ConfigError, InvalidURL
from courtier.core.urls import canonicalize
from courtier.frontier.value import parse_value
from courtier.store.base import HostTierRecord, Store

MAX_VALUES_PER_CALL = 10_000
#: longest interval bound accepted (a year)
MAX_BOUND = 365 * 86_400.0


class _HasStore(Protocol):
    store: Store
    config: CrawlConfig
    clock: Clock


class FreshnessControl:
    """Mixed into the API controls; the live control overrides :meth:`_live_plan`."""

    def _live_plan(self) -> dict[str, dict[str, float]] | None:
        """Planned fetches/day and fetches spent, by tier, of a running crawl."""
        return None

    async def set_values(self: _HasStore, items: Sequence[tuple[str, float]]) -> dict[str, Any]:
        """Set the values of known URLs: ``{"updated": n, "unknown": m}`` (unknown URLs
        are not added: seeds are for that)."""
        keyed = [(canonicalize(url).url_key, value) for url, value in items]
        updated = await self.store.set_values(keyed)
        return {"updated": updated, "unknown": len(keyed) - updated}

    async def get_freshness(self: _HasStore, domain: str) -> dict[str, Any]:
        keys = host_keys_for(domain)
        found = await self.store.host_tiers(keys)
        record = next((found[k] for k in keys if k in found), HostTierRecord(keys[0]))
        return {"domain": domain, "tier": record.tier, "min_interval": record.min_interval,
                "max_interval": record.max_interval, "value_factor": record.value_factor,
                "override": not record.is_empty(), "hosts": keys}

    async def put_freshness(self: _HasStore, domain: str,
                            record: HostTierRecord) -> dict[str, Any]:
        if record.tier is not None:
            from courtier.frontier.tiers import TierSet

            tiers = TierSet.from_specs(self.config.tiers, self.config.recrawl_interval)
            try:
                tiers.check_name(record.tier)
            except ConfigError as exc:
                raise ApiInputError(str(exc)) from None
        for key in host_keys_for(domain):
            await self.store.set_host_tier(HostTierRecord(
                key, record.tier, record.min_interval, record.max_interval, record.value_factor))
        return await FreshnessControl.get_freshness(self, domain)

    async def tier_budget(self: _HasStore, live: dict[str, dict[str, float]] | None
                          ) -> dict[str, dict[str, float | int | None]]:
        """By tier: ``due_24h`` (store), ``planned_per_day`` and ``spent`` (running crawl)."""
        return await tier_budget(self.store, self.clock.now(), live)


def _bound(body: dict[str, Any], name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not 0 < value <= MAX_BOUND:
        raise ApiInputError(f"{name} must be seconds in (0, {MAX_BOUND:g}] or null")
    return float(value)


def parse_freshness(body: Any) -> HostTierRecord:
    """A ``/freshness`` body: ``tier`` (name or null), ``min_interval``/``max_interval``
    (seconds or null), ``value_factor`` (or null)."""
    if not isinstance(body, dict):
        raise ApiInputError("body must be a JSON object")
    unknown = sorted(set(body) - {"tier", "min_interval", "max_interval", "value_factor"})
    if unknown:
        raise ApiInputError(f"unknown fields: {', '.join(unknown)}")
    tier = body.get("tier")
    if tier is not None and not isinstance(tier, str):
        raise ApiInputError("tier must be a tier name or null")
    low, high = _bound(body, "min_interval"), _bound(body, "max_interval")
    if low is not None and high is not None and low > high:
        raise ApiInputError("min_interval must not exceed max_interval")
    factor = body.get("value_factor")
    try:
        factor = None if factor is None else parse_value(factor, "value_factor")
    except ConfigError as exc:
        raise ApiInputError(str(exc)) from None
    return HostTierRecord("", tier, low, high, factor)


def parse_seed_value(value: Any) -> float | None:
    """A seed's ``value`` field (null: derive one)."""
    if value is None:
        return None
    try:
        return parse_value(value, "value")
    except ConfigError as exc:
        raise ApiInputError(str(exc)) from None


def parse_values(body: Any) -> list[tuple[str, float]]:
    """A ``/v1/urls/values`` body: ``{"values": [{"url": …, "value": …}, …]}``."""
    if not isinstance(body, dict) or set(body) != {"values"} or not isinstance(
            body["values"], list):
        raise ApiInputError('body must be {"values": [{"url": ..., "value": ...}, ...]}')
    items = body["values"]
    if len(items) > MAX_VALUES_PER_CALL:
        raise ApiInputError(f"at most {MAX_VALUES_PER_CALL} values per call")
    out: list[tuple[str, float]] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            raise ApiInputError(f"values[{i}] must be an object with a url and a value")
        try:
            value = parse_value(item.get("value"), f"values[{i}]")
            canonicalize(item["url"])
        except ConfigError as exc:
            raise ApiInputError(str(exc)) from None
        except InvalidURL as exc:
            raise ApiInputError(f"values[{i}]: not a crawlable URL ({exc})") from None
        out.append((item["url"], value))
    return out
