"""Crawler-trap defences: static URL rules and per-template throttling.

Two layers, both consulted by intake for every discovered link before it is
written to the store (see ``docs/traps.md``):

1. :func:`static_trap_reason` — stateless rules on one URL (length, path
   depth, repeated segments, query size, link depth).
2. :class:`TemplateTracker` — per host, groups URLs by
   :func:`~courtier.frontier.templates.url_template` and throttles a
   template that *explodes*, so that the rest of the host proceeds.

Explosion rule (all thresholds are :class:`TrapRules` fields). A template is
examined once it has at least ``template_min_urls`` distinct admitted URLs;
it is then throttled when any of these holds:

* **duplicate content** — at least ``template_min_fetched`` of its pages were
  fetched and the share of them whose fingerprint had already been seen for
  the template is ``>= template_max_duplicate_share``;
* **growth outpaces content** — at least ``template_min_fetched`` pages were
  fetched, at least ``template_growth_min_duplicate_share`` of them were
  duplicates, and the template's distinct discovered URLs are
  ``>= template_max_growth`` × its distinct fetched contents (the duplicate
  gate keeps a large, honest listing of distinct products from tripping it);
* **session ids** — its URLs carry session parameters
  (:data:`~courtier.frontier.templates.SESSION_PARAMS`) and there are at
  least ``template_max_session_aliases`` admitted URLs per distinct URL
  with those parameters removed;
* **facet combinations** — its URLs combine two or more query parameters
  with non-numeric values and there are ``>= template_max_facet_combinations``
  distinct combinations per distinct ``name=value`` atom (twelve filter
  values give thousands of combinations; ``?cat=…&page=N`` or ``?q=…``
  give about one per atom);
* **chain** — the admitted URLs span ``>= template_max_depth_span`` link
  depths (a next/prev chain such as an infinite calendar); only when
  ``admit`` is given depths.

A throttled template admits a URL only when a hash of its ``url_key`` falls
in the ``sample_rate`` fraction (so the decision is the same on every worker
and every retry), and only ``sample_budget`` such URLs in total; everything
else is rejected with the reason. Counts of distinct URLs and contents are
HyperLogLog estimates (:class:`~courtier.frontier.templates.DistinctCounter`),
so repeated offers of one link count once and memory per template is fixed.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from courtier.clock import Clock, RealClock
from courtier.errors import ConfigError
from courtier.frontier.templates import (
    TemplateStats,
    hash64,
    session_alias,
    url_hash64,
    url_template,
)
from courtier.urls import CanonicalUrl

__all__ = [
    "Decision",
    "TemplateReport",
    "TemplateTracker",
    "TrapRules",
    "Verdict",
    "static_trap_reason",
]

_DAY = 86_400.0
_SAMPLE_SCALE = 1 << 32


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


class Decision(enum.StrEnum):
    """What intake does with a link: keep it, keep it as a sample, or drop it."""

    ADMIT = "admit"
    SAMPLE = "sample"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The tracker's answer for one URL. ``reason`` is set for SAMPLE and REJECT."""

    decision: Decision
    template: str
    reason: str | None = None

    @property
    def admitted(self) -> bool:
        """True for ADMIT and SAMPLE: the URL should go to the store."""
        return self.decision is not Decision.REJECT


@dataclass(frozen=True, slots=True)
class TemplateReport:
    """One template's figures. ``admitted``/``discovered`` are distinct-URL
    estimates; ``duplicate_share`` is in [0, 1] (0 before any fetch); ``since``
    is when it was throttled (``None`` if it is not); ``recent`` counts
    admissions in the current and previous hour."""

    template: str
    admitted: int
    discovered: int
    duplicate_share: float
    since: float | None
    reason: str | None
    fetched: int = 0
    sampled: int = 0
    recent: int = 0


@dataclass(slots=True)
class _Host:
    templates: OrderedDict[str, TemplateStats] = field(default_factory=OrderedDict)
    day: int = -1
    day_admitted: int = 0


class TemplateTracker:
    """Per-crawl, per-host template statistics and throttling (one per worker).

    Memory is bounded: at most ``rules.max_hosts`` hosts (least recently used
    evicted) × ``rules.max_templates_per_host`` templates (least recently
    used *unthrottled* template evicted first), each a few hundred bytes.
    Evicting a host forgets its throttles; they are re-learned if the trap
    is met again. Not thread-safe; all methods are O(1) amortised.
    """

    def __init__(self, rules: TrapRules | None = None, clock: Clock | None = None) -> None:
        self.rules = (rules or TrapRules()).validate()
        self._clock: Clock = clock or RealClock()
        self._hosts: OrderedDict[str, _Host] = OrderedDict()
        self._threshold = int(self.rules.sample_rate * _SAMPLE_SCALE)

    def _host(self, host_key: str) -> _Host:
        hosts = self._hosts
        host = hosts.get(host_key)
        if host is None:
            host = hosts[host_key] = _Host()
            if len(hosts) > self.rules.max_hosts:
                hosts.popitem(last=False)
        else:
            hosts.move_to_end(host_key)
        return host

    def _template(self, host: _Host, template: str) -> TemplateStats:
        templates = host.templates
        stats = templates.get(template)
        if stats is None:
            stats = templates[template] = TemplateStats()
            if len(templates) > self.rules.max_templates_per_host:
                victim = next(
                    (k for k, v in templates.items() if v.since is None),
                    next(iter(templates)),
                )
                del templates[victim]
        else:
            templates.move_to_end(template)
        return stats

    def admit(self, host_key: str, url: CanonicalUrl, depth: int | None = None) -> Verdict:
        """Decide whether a discovered ``url`` of ``host_key`` goes to the store.

        ``depth`` (the link depth intake assigns) feeds the chain rule; omit it
        to disable that rule. Returns ADMIT (template not throttled), SAMPLE
        (throttled, admitted as part of the deterministic sample) or REJECT
        with a reason ("host daily page budget", or the template's throttle
        reason). Offering the same URL again is harmless for the counts.
        """
        now = self._clock.now()
        rules = self.rules
        host = self._host(host_key)
        template = url_template(url.path_and_query)
        stats = self._template(host, template)
        key = url_hash64(url.url_key)
        stats.discovered.add(key)
        if stats.since is not None:
            reason = f"throttled template: {stats.reason}"
            if stats.sampled >= rules.sample_budget:
                return Verdict(Decision.REJECT, template, reason + " (sample budget spent)")
            if (key & (_SAMPLE_SCALE - 1)) >= self._threshold:
                return Verdict(Decision.REJECT, template, reason + " (not sampled)")
        limit = rules.max_pages_per_host_per_day
        if limit is not None:
            day = int(now // _DAY)
            if day != host.day:
                host.day, host.day_admitted = day, 0
            if host.day_admitted >= limit:
                return Verdict(Decision.REJECT, template, "host daily page budget")
            host.day_admitted += 1
        path_and_query = url.path_and_query
        stats.note_admission(now, key, depth, session_alias(path_and_query))
        if "?" in template:
            stats.note_facets(path_and_query.partition("?")[2])
        if stats.since is not None:
            stats.sampled += 1
            return Verdict(Decision.SAMPLE, template, f"throttled template: {stats.reason}")
        self._check(stats, now)
        return Verdict(Decision.ADMIT, template)

    def observe_fetched(
        self, host_key: str, template: str, payload_digest: str | bytes | int
    ) -> None:
        """Record one successfully fetched page of ``template`` and its content fingerprint.

        ``payload_digest`` may be the SHA-256 payload digest or, better, the
        page's SimHash (then pages that differ only in markup, such as
        session ids inside links, count as duplicates). A page is a duplicate
        when its fingerprint was already seen for the template.
        """
        host = self._host(host_key)
        stats = self._template(host, template)
        stats.fetched += 1
        stats.contents.add(hash64(payload_digest))
        self._check(stats, self._clock.now())

    def _check(self, stats: TemplateStats, now: float) -> None:
        if stats.since is None:
            reason = stats.explosion(self.rules)
            if reason is not None:
                stats.since, stats.reason = now, reason

    def template_of(self, url: CanonicalUrl) -> str:
        """The template ``admit`` uses for ``url`` (pass it to ``observe_fetched``)."""
        return url_template(url.path_and_query)

    def throttled(self, host_key: str) -> list[TemplateReport]:
        """Reports of the host's throttled templates, oldest throttle first."""
        reports = [r for r in self.templates(host_key) if r.since is not None]
        return sorted(reports, key=lambda r: (r.since or 0.0, r.template))

    def templates(self, host_key: str) -> list[TemplateReport]:
        """Reports of every template tracked for the host (most recently used last)."""
        host = self._hosts.get(host_key)
        if host is None:
            return []
        hour = int(self._clock.now() // 3600)
        out = []
        for template, s in host.templates.items():
            recent = 0
            if s.hour == hour:
                recent = s.this_hour + s.last_hour
            elif s.hour == hour - 1:
                recent = s.this_hour
            out.append(
                TemplateReport(
                    template=template,
                    admitted=s.admitted.count(),
                    discovered=s.discovered.count(),
                    duplicate_share=round(s.duplicate_share(), 4),
                    since=s.since,
                    reason=s.reason,
                    fetched=s.fetched,
                    sampled=s.sampled,
                    recent=recent,
                )
            )
        return out

    def hosts(self) -> list[str]:
        """Host keys currently tracked (least recently used first)."""
        return list(self._hosts)
