"""Hosts on one address, spread over three workers: the per-IP cap holds across them.

Every host of the test web resolves to 127.0.0.1, and the shards (so the hosts)
are spread over the workers by host name: without the store's IP slots each
worker would allow its own ``--max-in-flight-per-ip`` to the one address.
"""

from __future__ import annotations

import collections
import dataclasses

import pytest

from courtier.core.urls import canonicalize
from courtier.testweb.server import max_overlap
from tests.integration.cluster.harness import (
    Cluster,
    check_outbox,
    finish,
    ids_each_owning,
    start_three,
)

pytestmark = pytest.mark.timeout(600)


# 30 pages a host, as before: at 15 one run had a worker that fetched from one host only
# (the spread below, a precondition, not met); at 30 that was seen once too (docs/testing.md)
@pytest.mark.parametrize("pages_per_host", [30])
async def test_the_per_ip_cap_holds_across_workers(cluster: Cluster) -> None:
    cluster.extra += ["--max-in-flight-per-ip", "2"]
    expected = cluster.server.web.expected_fetches()
    # ids that each own at least 2 hosts with pages: with w0, w1, w2 one of them owns none
    # for about 1 port in 20 (a host's shard depends on the server's random port), which
    # failed the spread precondition below twice (docs/testing.md)
    ids = ids_each_owning({c.host: c.shard for c in map(canonicalize, expected)})
    await start_three(cluster, ids)
    await finish(cluster, expected)
    log = cluster.log()
    # the hosts really were spread: at least two workers fetched from several of them
    # (which worker ends up with how many depends on how much the first one, alone at
    # the start, crawled before the others joined: a third with one host or none was
    # seen, and the cap is crossed by any two)
    hosts_by_worker = collections.defaultdict(set)
    for r in log:
        hosts_by_worker[r.user_agent].add(r.host)
    assert sum(len(h) >= 2 for h in hosts_by_worker.values()) >= 2, hosts_by_worker
    # every request of every host went to one address: never more than 2 at once (each
    # end taken 10 ms early: the server logs an end after the client has read the body)
    trimmed = [dataclasses.replace(r, end=max(r.start, r.end - 0.01)) for r in log]
    assert max_overlap(trimmed) <= 2
    assert max_overlap(log) > 0
    assert expected - cluster.fetched() == set()
    await check_outbox(cluster, expected)
    assert cluster.violations() == []
