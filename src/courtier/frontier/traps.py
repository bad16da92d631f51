"""Crawler-trap defences: static URL rules and per-template throttling.

Two layers, both consulted by intake for every discovered link before it is
written to the store (see ``docs/traps.md``):

1. :func:`static_trap_reason` — stateless rules on one URL (length, path
   depth, repeated segments, query size, link depth); it lives with
   :class:`TrapRules` and ``trap_rules_from`` in
   :mod:`courtier.frontier.trap_rules`, and is re-exported here.
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

import enum
from collections import OrderedDict
from dataclasses import dataclass, field

from courtier.core.clock import Clock, RealClock
from courtier.core.urls import CanonicalUrl
from courtier.frontier.templates import (
    TemplateStats,
    hash64,
    session_alias,
    url_hash64,
    url_template,
)
from courtier.frontier.trap_rules import TrapRules, static_trap_reason, trap_rules_from

__all__ = [
    "Decision",
    "TemplateReport",
    "TemplateTracker",
    "TrapRules",
    "Verdict",
    "static_trap_reason",
    "trap_rules_from",
]

_DAY = 86_400.0
_SAMPLE_SCALE = 1 << 32


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
    Evicting a host forgets its throttles here; they are re-learned if the trap
    is met again (a crawl keeps them in its store instead:
    :class:`~courtier.frontier.trap_state.ShardedTemplateTracker`). Not
    thread-safe; all methods are O(1) amortised.
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
            host = hosts[host_key] = self._new_host(host_key)
            if len(hosts) > self.rules.max_hosts:
                self._evicted(*hosts.popitem(last=False))
        else:
            hosts.move_to_end(host_key)
        return host

    def _new_host(self, host_key: str) -> _Host:
        """The state of a host entering the working set: empty here."""
        return _Host()

    def _evicted(self, host_key: str, host: _Host) -> None:
        """A host pushed out of the working set (least recently used): forgotten here."""

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
