"""Intake: raw URL strings → canonical, in-scope, probably-new :class:`NewUrl` rows.

Every discovered URL (seeds, links, redirect targets) passes through here:
canonicalize → scope and depth rules → Bloom filter ("definitely new"
skips nothing here: it only lets the caller know the store lookup is needed;
the store's unique key stays the truth about "seen").
"""

from __future__ import annotations

import contextlib
import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from courtier.core.config import CrawlConfig
from courtier.core.errors import InvalidURL
from courtier.core.tracking import TrackingParams
from courtier.core.urls import CanonicalUrl, canonicalize, registrable_domain
from courtier.crawl.link_memo import canonicalize_link
from courtier.dedup.known_urls import KnownUrls
from courtier.dedup.seen import SeenFilter
from courtier.frontier.traps import TemplateTracker, TrapRules, static_trap_reason
from courtier.store.base import NewUrl
from courtier.store.cluster import ScopeRule

SEED_PRIORITY = 10
LINK_PRIORITY = 0


@dataclass(frozen=True, slots=True)
class SeedProblem:
    """A seed line that could not be used, with where it came from."""

    source: str
    line: int
    text: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.reason}: {self.text!r}"


#: a ``#`` at the start of a line or after whitespace starts a comment (``http://h/#x``
#: keeps its fragment)
_COMMENT = re.compile(r"(?:^|\s)#")
#: seeds on one line are separated by whitespace, or by a comma that ends a URL (followed
#: by whitespace, the end of the line or another ``scheme://``): ``http://h/a,b`` is one URL
_SEPARATOR = re.compile(r"\s+|,(?=\s|$)|,(?=[A-Za-z][A-Za-z0-9+.-]*://)")


def split_seed_line(line: str) -> list[str]:
    """The seeds of one line of a seeds file: the comment dropped, split on whitespace and
    commas (see README, "Seed files")."""
    text = _COMMENT.split(line, maxsplit=1)[0]
    return [part for part in _SEPARATOR.split(text) if part]


def read_seed_lines(path: Path) -> list[tuple[int, str]]:
    """The seeds of a seeds file with their 1-based line numbers (one pair per seed: a
    line may hold several, see :func:`split_seed_line`)."""
    out: list[tuple[int, str]] = []
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            out.extend((number, text) for text in split_seed_line(line))
    return out


class Scope:
    """Which URLs the crawl admits: host/domain rules, include/exclude regexes, depth."""

    def __init__(self, config: CrawlConfig, seeds: Iterable[CanonicalUrl]) -> None:
        self.config = config
        self.mode = config.scope
        self.max_depth = config.max_depth
        self.include = [re.compile(p) for p in config.include]
        self.exclude = [re.compile(p) for p in config.exclude]
        self.hosts: set[str] = set()
        self.domains: set[str] = set()
        for seed in seeds:
            self.add_seed(seed)

    def add_seed(self, seed: CanonicalUrl) -> None:
        self.hosts.add(seed.host)
        self.domains.add(registrable_domain(seed.host))

    @staticmethod
    def rules_for(seed: CanonicalUrl) -> list[ScopeRule]:
        """The shared scope rules a seed added at run time stands for (every worker
        applies them: :meth:`apply_rule` over ``Store.scope_rules``)."""
        return [ScopeRule("host", seed.host), ScopeRule("domain", registrable_domain(seed.host))]

    def apply_rule(self, rule: ScopeRule) -> bool:
        """Apply a rule stored by any worker; False for an unknown kind or a bad regex."""
        if rule.kind == "host":
            self.hosts.add(rule.value)
        elif rule.kind == "domain":
            self.domains.add(rule.value)
        elif rule.kind in ("include", "exclude"):
            try:
                pattern = re.compile(rule.value)
            except re.error:
                return False
            target = self.include if rule.kind == "include" else self.exclude
            if all(p.pattern != rule.value for p in target):
                target.append(pattern)
        else:
            return False
        return True

    def rejects(self, url: CanonicalUrl, depth: int) -> str | None:
        """Why this URL is out of scope, or None when it is admitted."""
        if self.max_depth is not None and depth > self.max_depth:
            return "too deep"
        if self.mode == "seeds-hosts" and url.host not in self.hosts:
            return "host not in seeds"
        if self.mode == "seeds-domains" and registrable_domain(url.host) not in self.domains:
            return "domain not in seeds"
        if self.include and not any(p.search(url.url) for p in self.include):
            return "not matched by --include"
        if any(p.search(url.url) for p in self.exclude):
            return "matched by --exclude"
        return None


def seed_scope_rules(rows: Iterable[NewUrl]) -> list[ScopeRule]:
    """The shared scope rules seed rows (depth 0) stand for (:meth:`Scope.rules_for`)."""
    rules: dict[tuple[str, str], ScopeRule] = {}
    for row in rows:
        if row.depth == 0:
            with contextlib.suppress(InvalidURL):
                for rule in Scope.rules_for(canonicalize(row.url)):
                    rules[(rule.kind, rule.value)] = rule
    return list(rules.values())


class Intake:
    """Turns candidate URLs into NewUrl rows for the store.

    A link to a shard whose known keys are loaded (``known``, the owner-local state of
    the shards this worker holds: dedup/known_urls.py) is decided in memory: a known key
    is dropped, any other is written. For the other shards (held elsewhere, still
    loading, past the cap) two filters keep repeated links (navigation on every page)
    away from the store without ever deciding "seen" wrongly: ``seen`` (Bloom) answers
    "definitely new" for keys never offered before, and ``committed`` is an exact,
    bounded LRU of keys the store has already acknowledged. Anything else goes to the
    store, whose unique key decides (it does for written keys too: never twice).
    """

    def __init__(
        self, scope: Scope, seen: SeenFilter | None = None, committed_window: int = 200_000,
        traps: TemplateTracker | None = None, trap_rules: TrapRules | None = None,
        tracking: TrackingParams | None = None, known: KnownUrls | None = None,
    ) -> None:
        self.scope = scope
        #: the exact known keys of the shards this worker holds (None: none kept)
        self.known = known
        #: tracking parameters removed from every URL taken in (default: the config's)
        self.tracking = tracking or TrackingParams.from_specs(scope.config.strip_params,
                                                              scope.config.keep_params)
        self.traps = traps
        self.trap_rules = trap_rules or (traps.rules if traps is not None else TrapRules())
        self.trap_rejected = 0
        self.seen = seen or SeenFilter(expected_items=1_000_000)
        self.committed: OrderedDict[bytes, None] = OrderedDict()
        self.committed_window = committed_window
        self.rejected = 0
        self.definitely_new = 0
        self.known_skips = 0

    def remember(self, keys: Iterable[bytes]) -> None:
        """Keys the store has durably acknowledged (call after a successful commit)."""
        committed = self.committed
        keys = list(keys)
        if self.known is not None:
            self.known.add(keys)
        for key in keys:
            committed[key] = None
            committed.move_to_end(key)
        while len(committed) > self.committed_window:
            committed.popitem(last=False)

    def handed_in(self, keys: Iterable[bytes]) -> None:
        """Keys of a result handed to the committer (written by its next batch)."""
        if self.known is not None:
            self.known.offer(keys)

    def batch_started(self) -> int:
        """A commit batch began; returns its generation for :meth:`batch_ended`."""
        return 0 if self.known is None else self.known.batch_started()

    def batch_ended(self, generation: int) -> None:
        """That batch was acknowledged (after :meth:`remember`) or given up."""
        if self.known is not None:
            self.known.batch_ended(generation)

    def make(
        self,
        url: CanonicalUrl,
        depth: int,
        now: float,
        priority: int = LINK_PRIORITY,
        redirect_hops: int = 0,
        check_scope: bool = True,
        redirect_chain: str | None = None,
    ) -> NewUrl | None:
        url = self.tracking.clean(url)
        if check_scope and self.scope.rejects(url, depth) is not None:
            self.rejected += 1
            return None
        return NewUrl(
            url_key=url.url_key, url=url.url, host_key=url.host_key, shard=url.shard,
            depth=depth, priority=priority, next_fetch_at=now, discovered_at=now,
            redirect_hops=redirect_hops, redirect_chain=redirect_chain,
        )

    def links(self, raw_links: Iterable[str], depth: int, now: float,
              priority: int = LINK_PRIORITY, check_traps: bool = True) -> list[NewUrl]:
        """Canonicalize links found on a page of ``depth - 1``; invalid ones are dropped.

        Out-of-scope links and crawler traps (static rules, then the template
        tracker's verdict) are dropped too; sitemap entries pass
        ``check_traps=False``.
        """
        out: list[NewUrl] = []
        batch_keys: set[bytes] = set()
        known = self.known
        for raw in raw_links:
            # links repeated across pages (navigation) are parsed once: canonicalize_link
            # keeps a bounded memo shared with the event feed, which read the page first
            try:
                url = self.tracking.clean(canonicalize_link(raw))
            except InvalidURL:
                self.rejected += 1
                continue
            key = url.url_key
            if key in batch_keys:
                continue
            if key in self.committed:  # acknowledged by the store: known, whatever the shard
                self.known_skips += 1
                continue
            verdict = None if known is None else known.knows(key, url.shard)
            if verdict or (verdict is False and known is not None and known.is_pending(key)):
                self.known_skips += 1  # known, or written by a batch not committed yet
                continue
            if verdict is None and not self.seen.maybe_seen(key):
                self.definitely_new += 1
                self.seen.add(key)
            if self.scope.rejects(url, depth) is not None:
                self.rejected += 1
                continue
            if check_traps and self._trapped(url, depth):
                self.trap_rejected += 1
                continue
            new = self.make(url, depth, now, priority=priority, check_scope=False)
            if new is None:
                continue
            batch_keys.add(key)
            out.append(new)
        return out

    def _trapped(self, url: CanonicalUrl, depth: int) -> bool:
        if static_trap_reason(url, depth, self.trap_rules) is not None:
            return True
        return self.traps is not None and not self.traps.admit(url.host_key, url, depth).admitted

    def seed_urls(
        self, lines: Iterable[tuple[int, str]], source: str, now: float
    ) -> tuple[list[NewUrl], list[SeedProblem]]:
        """Seeds with their problems reported by line (never raises on bad input)."""
        rows: list[NewUrl] = []
        problems: list[SeedProblem] = []
        for number, text in lines:
            try:
                url = canonicalize(text)
            except InvalidURL as exc:
                problems.append(SeedProblem(source, number, text, str(exc)))
                continue
            self.scope.add_seed(url)
            new = self.make(url, 0, now, priority=SEED_PRIORITY, check_scope=False)
            if new is not None:
                rows.append(new)
        return rows, problems
