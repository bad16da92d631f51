"""Scope rules shared by every worker of a crawl.

A seed added at run time (``courtier seed add``, ``POST /v1/seeds`` on any worker)
extends the scope (``--scope seeds-hosts`` / ``seeds-domains``) of the worker that
took it at once, and is stored as scope rules (``Store.add_scope_rules``). Every
other worker follows the stored rules with a :class:`ScopeFollower`, polled with its
heartbeat, so a link to the new host found on any worker is admitted there too.
Seeds given at start need no rule: every worker reads them (``Store.seed_urls``)
when it starts.
"""

from __future__ import annotations

import logging

from courtier.core.logs import log_event
from courtier.crawl.intake import Scope
from courtier.store.cluster import ClusterStore

log = logging.getLogger("courtier.cluster")


class ScopeFollower:
    """Applies the rules stored since the last poll to one worker's scope."""

    def __init__(self, scope: Scope, after: int = 0) -> None:
        self.scope = scope
        self.after = after          # the id of the last rule applied
        self.ignored = 0            # rules this courtier cannot apply (unknown kind, bad regex)

    async def poll(self, store: ClusterStore, limit: int = 10_000) -> int:
        """Apply rules added since the last poll (at most ``limit`` rules); return how many
        were read. A StoreError propagates (poll again later: nothing was skipped)."""
        rules = (await store.scope_rules(self.after))[:limit]
        for rule in rules:
            if not self.scope.apply_rule(rule):
                self.ignored += 1
                log_event(log, logging.WARNING, "scope_rule_ignored",
                          "scope rule %d (%s %r) cannot be applied; ignored",
                          rule.id, rule.kind, rule.value, reason="cannot be applied")
            self.after = rule.id
        return len(rules)
