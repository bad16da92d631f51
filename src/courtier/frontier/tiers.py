"""Named refresh tiers: interval bounds per class of page, and how a URL gets its tier.

Pure, no I/O. A tier is a name with ``[min_interval, max_interval]`` bounds and a
starting interval; the change-rate estimator (``frontier/recrawl.py``) works inside
the bounds of the URL's tier. ``docs/freshness.md`` §2 documents the rules:

1. a host override (``policy set HOST --tier hot`` and/or ``--min-interval`` /
   ``--max-interval``) wins;
2. else the first tier (in configuration order) with a URL pattern that matches;
3. else the tier with the highest ``min-value`` the URL's value reaches;
4. else the ``default`` tier: 1 day … 30 days, starting at ``--recrawl-interval``
   (a tier named ``default`` in the configuration replaces it).

Configuration: a TOML table per tier, or ``--tier`` specs
``NAME min=SECONDS max=SECONDS [start=SECONDS] [value=V] [url=REGEX …]``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from courtier.core.errors import ConfigError
from courtier.core.records import HostTierRecord
from courtier.frontier.recrawl import DAY, RecrawlPolicy

__all__ = ["DEFAULT_TIER", "HOST_TIER", "Tier", "TierSet", "parse_tier",
           "tier_specs_from_toml"]

DEFAULT_TIER = "default"
#: tier name of a host override that gives bounds but no tier
HOST_TIER = "host"
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


@dataclass(frozen=True, slots=True)
class Tier:
    """One refresh tier. ``start`` is the interval before any history (None: ``min``)."""

    name: str
    min_interval: float
    max_interval: float
    start: float | None = None
    min_value: float | None = None
    url_patterns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConfigError(f"tier name {self.name!r}: lower-case letters, digits, - and _")
        if not 0 < self.min_interval <= self.max_interval:
            raise ConfigError(f"tier {self.name}: need 0 < min <= max interval, got "
                              f"{self.min_interval:g} and {self.max_interval:g}")
        if self.start is not None and not self.min_interval <= self.start <= self.max_interval:
            raise ConfigError(f"tier {self.name}: start must lie within min … max")
        if self.min_value is not None and self.min_value < 0:
            raise ConfigError(f"tier {self.name}: value threshold must be >= 0")
        for pattern in self.url_patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(f"tier {self.name}: url {pattern!r}: {exc}") from None

    def policy(self, base: RecrawlPolicy) -> RecrawlPolicy:
        """``base`` with this tier's bounds and starting interval."""
        start = self.min_interval if self.start is None else self.start
        return dataclasses.replace(base, min_interval=self.min_interval,
                                   max_interval=self.max_interval, default_interval=start)


class TierSet:
    """The configured tiers plus the default one; assigns a tier to each URL."""

    def __init__(self, tiers: Sequence[Tier], default: Tier) -> None:
        by_name = {t.name: t for t in tiers}
        if len(by_name) != len(tiers):
            raise ConfigError("tier names must be unique")
        self.default = by_name.pop(DEFAULT_TIER, default)
        self.tiers = [t for t in tiers if t.name != DEFAULT_TIER]
        self.by_name: dict[str, Tier] = {**by_name, DEFAULT_TIER: self.default}
        self._patterns = [(t, [re.compile(p) for p in t.url_patterns]) for t in self.tiers]
        self._by_value = sorted((t for t in self.tiers if t.min_value is not None),
                                key=lambda t: -(t.min_value or 0.0))

    @classmethod
    def from_specs(cls, specs: Iterable[str], recrawl_interval: float = DAY) -> TierSet:
        default = Tier(DEFAULT_TIER, min(DAY, recrawl_interval), max(30 * DAY, recrawl_interval),
                       start=recrawl_interval)
        return cls([parse_tier(s) for s in specs], default)

    def names(self) -> list[str]:
        return [t.name for t in self.tiers] + [DEFAULT_TIER]

    def check_name(self, name: str) -> Tier:
        tier = self.by_name.get(name)
        if tier is None:
            raise ConfigError(f"unknown tier {name!r}; configured: {', '.join(self.names())}")
        return tier

    def assign(self, url: str, value: float, host: HostTierRecord | None = None) -> Tier:
        """The tier of ``url`` with ``value`` (rules in the module docstring)."""
        if host is not None and (host.tier is not None or host.min_interval is not None
                                 or host.max_interval is not None):
            base = self.by_name.get(host.tier or "", None)
            if base is None:
                base = Tier(HOST_TIER, host.min_interval or self.default.min_interval,
                            host.max_interval or self.default.max_interval)
                if host.tier is None and host.min_interval is not None:
                    base = dataclasses.replace(base, start=None)
            low = host.min_interval if host.min_interval is not None else base.min_interval
            high = host.max_interval if host.max_interval is not None else base.max_interval
            high = max(low, high)
            start = base.start if base.start is not None and low <= base.start <= high else None
            return Tier(base.name, low, high, start=start)
        for tier, patterns in self._patterns:
            if any(p.search(url) for p in patterns):
                return tier
        for tier in self._by_value:
            if value >= (tier.min_value or 0.0):
                return tier
        return self.default


def _seconds(name: str, key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"tier {name}: {key}={text!r} is not a number of seconds") from None
    return value


def parse_tier(spec: str) -> Tier:
    """``NAME min=S max=S [start=S] [value=V] [url=REGEX …]`` (see the module docstring)."""
    parts = spec.split()
    if not parts:
        raise ConfigError("--tier: empty tier spec")
    name, fields = parts[0], parts[1:]
    values: dict[str, float] = {}
    urls: list[str] = []
    for field in fields:
        key, sep, text = field.partition("=")
        if not sep:
            raise ConfigError(f"tier {name}: expected KEY=VALUE, got {field!r}")
        if key == "url":
            urls.append(text)
        elif key in ("min", "max", "start", "value"):
            values[key] = _seconds(name, key, text)
        else:
            raise ConfigError(f"tier {name}: unknown key {key!r} (min, max, start, value, url)")
    if "min" not in values or "max" not in values:
        raise ConfigError(f"tier {name}: min= and max= are required")
    return Tier(name, values["min"], values["max"], start=values.get("start"),
                min_value=values.get("value"), url_patterns=tuple(urls))


_TOML_KEYS = {"min-interval": "min", "max-interval": "max", "start-interval": "start",
              "min-value": "value"}


def tier_specs_from_toml(table: Mapping[str, object], where: str) -> list[str]:
    """``[tiers.NAME]`` tables (``min-interval``, ``max-interval``, ``start-interval``,
    ``min-value``, ``urls``) as ``--tier`` specs."""
    specs: list[str] = []
    for name, body in table.items():
        if not isinstance(body, Mapping):
            raise ConfigError(f"{where}: [tiers.{name}] must be a table")
        words = [str(name)]
        for key, value in body.items():
            short = _TOML_KEYS.get(str(key).replace("_", "-"))
            if key == "urls":
                if not isinstance(value, list) or not all(isinstance(u, str) for u in value):
                    raise ConfigError(f"{where}: [tiers.{name}] urls must be a list of regexes")
                if any(c.isspace() for u in value for c in u):
                    raise ConfigError(f"{where}: [tiers.{name}] urls: write spaces as \\s")
                words += [f"url={u}" for u in value]
            elif short is None:
                raise ConfigError(f"{where}: [tiers.{name}] unknown key {key!r}")
            else:
                words.append(f"{short}={value}")
        specs.append(" ".join(words))
    return specs
