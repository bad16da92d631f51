"""A policy on a registrable domain covers its subdomains unless a host policy overrides
it (judged from the test web server's log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from courtier.api.control import StoreOnlyControl
from courtier.core.urls import canonicalize, shard_of
from courtier.crawl.app import crawl
from courtier.frontier.host import HostPolicy, domain_host_key
from courtier.store.memory import MemoryStore
from courtier.store.sqlite import SqliteStore
from courtier.testweb import TestWebServer, default_web
from tests.integration.crawl.test_crawl_testweb import config_for


@pytest.mark.timeout(120)
async def test_domain_block_covers_subdomains_but_not_an_overridden_host(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with TestWebServer(default_web(n_hosts=3, pages_per_host=4, crawl_delay=0.1)) as server:
        seeds = server.web.seeds()
        keys = [canonicalize(s).host_key for s in seeds]
        domain = domain_host_key(keys[0])
        assert domain is not None and all(domain_host_key(k) == domain for k in keys)
        store = SqliteStore(data / "courtier.db")
        await store.open()
        await store.set_policy(domain, shard_of(domain), None, None, None, True)
        await store.set_policy(keys[1], shard_of(keys[1]), 0.2, None, None, False)  # own policy
        await store.close()
        await crawl(config_for(server, data), install_signals=False)  # type: ignore[arg-type]
        hosts = {r.host for r in server.log}
    own = canonicalize(seeds[1]).host
    assert hosts == {own}  # the blocked domain's other hosts got no request at all


async def test_api_reports_the_inherited_policy() -> None:
    store = MemoryStore()
    control = StoreOnlyControl(store)
    await control.put_policy("example.com", HostPolicy(delay=7.0))
    answer = await control.get_policy("www.example.com")
    assert answer["override"] is False
    assert answer["policy"]["delay"] == 7.0
    assert answer["inherited_from"] == "http://example.com"
    await control.put_policy("www.example.com", HostPolicy(delay=2.0))
    answer = await control.get_policy("www.example.com")
    assert answer["policy"]["delay"] == 2.0 and answer["inherited_from"] is None
    await control.put_policy("example.com", HostPolicy(blocked=True))
    await control.delete_policy("www.example.com")
    results = await control.add_seeds(["http://img.example.com/"], extend_scope=True)
    assert results[0]["result"] == "rejected" and results[0]["reason"] == "blocked by policy"
