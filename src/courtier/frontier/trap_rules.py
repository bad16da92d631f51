"""Trap rules: the limits of trap detection (:class:`TrapRules`, also read from
``--trap NAME=VALUE`` settings) and the stateless checks on one URL.

:func:`static_trap_reason` is the first of the two layers intake consults for every
discovered link (``docs/traps.md``): length, path depth, repeated segments, query size
and link depth of the URL alone. The second, per-template throttling, is
:class:`~courtier.frontier.traps.TemplateTracker`, which reads its thresholds from the
same :class:`TrapRules`. :mod:`courtier.frontier.traps` re-exports these names.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from courtier.core.errors import ConfigError
from courtier.core.urls import CanonicalUrl

__all__ = ["TrapRules", "static_trap_reason", "trap_rules_from"]


@dataclass(frozen=True, slots=True)
class TrapRules:
    """Limits of trap detection; ``None`` disables a limit. See docs/traps.md."""

    max_url_length: int = 2048
    max_path_depth: int = 24
    max_repeated_segment: int = 3
    max_query_params: int = 30
    max_pages_per_host_per_day: int | None = None
    max_link_depth: int | None = None
    template_min_urls: int = 100
    template_min_fetched: int = 10
    template_max_duplicate_share: float = 0.5
    template_max_growth: float | None = 10.0
    template_growth_min_duplicate_share: float = 0.2
    template_max_session_aliases: float | None = 2.0
    template_max_facet_combinations: float | None = 4.0
    template_max_depth_span: int | None = 50
    sample_rate: float = 0.1
    sample_budget: int = 50
    max_templates_per_host: int = 64
    max_hosts: int = 1024

    def validate(self) -> TrapRules:
        """Check ranges; raise :class:`ConfigError` naming the field."""
        positive = {
            "max_url_length": self.max_url_length,
            "max_path_depth": self.max_path_depth,
            "max_repeated_segment": self.max_repeated_segment,
            "max_query_params": self.max_query_params,
            "template_min_urls": self.template_min_urls,
            "template_min_fetched": self.template_min_fetched,
            "max_templates_per_host": self.max_templates_per_host,
            "max_hosts": self.max_hosts,
        }
        for name, value in positive.items():
            if value < 1:
                raise ConfigError(f"trap rule {name} must be >= 1, got {value}")
        if not 0.0 <= self.sample_rate <= 1.0:
            raise ConfigError(f"trap rule sample_rate must be in [0, 1], got {self.sample_rate}")
        for name, share in (
            ("template_max_duplicate_share", self.template_max_duplicate_share),
            ("template_growth_min_duplicate_share", self.template_growth_min_duplicate_share),
        ):
            if not 0.0 <= share <= 1.0:
                raise ConfigError(f"trap rule {name} must be in [0, 1], got {share}")
        if self.sample_budget < 0:
            raise ConfigError("trap rule sample_budget must be >= 0")
        return self


def trap_rules_from(settings: Sequence[str], source: str = "--trap") -> TrapRules:
    """:class:`TrapRules` with ``NAME=VALUE`` settings applied over the defaults.

    NAME is a field of TrapRules (``-`` or ``_``); VALUE an integer or number as the
    field needs, or ``none`` to turn an optional limit off. Errors name ``source``
    and the setting (:class:`ConfigError`).
    """
    fields = {f.name: str(f.type) for f in dataclasses.fields(TrapRules)}
    values: dict[str, object] = {}
    for item in settings:
        name, sep, text = item.partition("=")
        key = name.strip().replace("-", "_")
        if not sep or key not in fields:
            known = ", ".join(sorted(n.replace("_", "-") for n in fields))
            raise ConfigError(f"{source} {item!r}: expected NAME=VALUE with NAME one of {known}")
        kind, text = fields[key], text.strip()
        try:
            if text.lower() == "none":
                if "None" not in kind:
                    raise ValueError(text)
                values[key] = None
            elif kind.startswith("int"):
                values[key] = int(text)
            else:
                number = float(text)
                if not math.isfinite(number):
                    raise ValueError(text)
                values[key] = number
        except ValueError:
            raise ConfigError(f"{source} {item!r}: {name.strip()} has an invalid value "
                              f"{text!r}") from None
    try:
        return dataclasses.replace(TrapRules(), **values).validate()  # type: ignore[arg-type]
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _longest_run_repeat(segments: list[str]) -> int:
    """Most consecutive repetitions of any run of 2+ segments (1 when none repeat)."""
    best = 1
    n = len(segments)
    for size in range(2, n // 2 + 1):
        for start in range(n - 2 * size + 1):
            reps = 1
            while (
                start + (reps + 1) * size <= n
                and segments[start + reps * size : start + (reps + 1) * size]
                == segments[start : start + size]
            ):
                reps += 1
            best = max(best, reps)
    return best


def static_trap_reason(url: CanonicalUrl, depth: int, rules: TrapRules) -> str | None:
    """Why ``url`` (found at link ``depth``) looks like a trap, or ``None``.

    Rules, in order: canonical URL longer than ``max_url_length`` ("url too
    long"); more than ``max_path_depth`` non-empty path segments ("path too
    deep"); one segment occurring more than ``max_repeated_segment`` times, or
    a run of two or more segments repeated ``max_repeated_segment`` times in a
    row like ``/a/b/a/b/a/b`` ("repeated path segments"); more than
    ``max_query_params`` query parameters ("too many query parameters");
    ``depth`` above ``max_link_depth`` ("link depth exceeded"). Pure.
    """
    if len(url.url) > rules.max_url_length:
        return "url too long"
    path, _, query = url.path_and_query.partition("?")
    segments = [s for s in path.split("/") if s]
    if len(segments) > rules.max_path_depth:
        return "path too deep"
    if len(segments) > rules.max_repeated_segment:
        counts: dict[str, int] = {}
        for segment in segments:
            counts[segment] = counts.get(segment, 0) + 1
        if max(counts.values()) > rules.max_repeated_segment:
            return "repeated path segments"
        if len(segments) >= 2 * rules.max_repeated_segment and (
            _longest_run_repeat(segments) >= rules.max_repeated_segment
        ):
            return "repeated path segments"
    if query and query.count("&") + 1 > rules.max_query_params:
        params = sum(1 for part in query.split("&") if part)
        if params > rules.max_query_params:
            return "too many query parameters"
    if rules.max_link_depth is not None and depth > rules.max_link_depth:
        return "link depth exceeded"
    return None
