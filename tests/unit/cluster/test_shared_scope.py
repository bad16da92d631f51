"""A seed added through one worker's API extends every worker's scope once they poll."""

from __future__ import annotations

import asyncio

import pytest

from courtier.api.control import StoreOnlyControl
from courtier.cluster.shared_scope import ScopeFollower
from courtier.core.config import CrawlConfig
from courtier.core.errors import StoreError
from courtier.core.urls import canonicalize
from courtier.crawl.intake import Scope
from courtier.store.cluster import ScopeRule
from courtier.store.memory import MemoryStore


def test_other_workers_admit_links_to_a_seed_added_elsewhere() -> None:
    async def go() -> None:
        store = MemoryStore()
        config = CrawlConfig(scope="seeds-hosts")
        other = Scope(config, [canonicalize("http://first.test/")])
        follower = ScopeFollower(other)
        link = canonicalize("http://added.test/page")
        assert other.rejects(link, 1) == "host not in seeds"
        results = await StoreOnlyControl(store, config).add_seeds(
            ["http://added.test/"], extend_scope=True)
        assert results[0]["result"] == "accepted"
        assert await follower.poll(store) == 2
        assert other.rejects(link, 1) is None
        assert await follower.poll(store) == 0  # nothing new
        with pytest.raises(StoreError, match="not a regular expression"):
            await store.add_scope_rules([ScopeRule("include", "([")])
        await store.add_scope_rules([ScopeRule("exclude", r"/private/")])
        assert await follower.poll(store) == 1
        assert follower.ignored == 0
        assert other.rejects(canonicalize("http://added.test/private/x"), 1) \
            == "matched by --exclude"
        assert not other.apply_rule(ScopeRule("include", "(["))  # from a newer courtier

    asyncio.run(go())
