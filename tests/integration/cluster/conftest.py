"""Fixtures of the real-process cluster tests: a database reset to a new one's state and a
test web each; for the Citus node tests a Citus cluster of the test's own (``own_citus``,
``crawl_db``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from courtier.cluster.rendezvous import target_owners
from courtier.core.urls import SHARD_COUNT, shard_of
from courtier.testweb.spec import default_web, host_name
from tests.citus_cluster import CitusCluster, citus_cluster
from tests.integration.cluster.citus_nodes import OwnCitus
from tests.integration.cluster.harness import CITUS_TTL, TTL, Cluster, serving
from tests.pg import end_other_sessions, reset


def spread_domain(n_hosts: int, workers: tuple[str, ...] = ("w0", "w1", "w2"),
                  least: int = 3) -> str:
    """A domain for the test web's host names under which each of ``workers`` (equal
    weights) owns at least ``least`` of the ``n_hosts`` hosts. Shards are the host names'
    digests, so the names decide the owners, the same in every run; the tests that wait
    for one worker to fetch need it to own hosts (``h00…h11.courtier.test`` put 9 of 12
    on w0 and none on w1)."""
    owners = target_owners(range(SHARD_COUNT), dict.fromkeys(workers, 1.0))
    for k in range(1000):
        domain = f"c{k}.courtier.test"
        counts = {w: 0 for w in workers}
        for i in range(n_hosts):
            counts[owners[shard_of(host_name(i, domain))]] += 1
        if min(counts.values()) >= least:
            return domain
    raise AssertionError(f"no domain spreads {n_hosts} hosts over {workers}")


@pytest.fixture
def dsn(request: pytest.FixtureRequest) -> str:
    """A database that starts as a new one: the test process's shared database of the local
    PostgreSQL server (``pg_shared_dsn``), or of the session's Citus cluster
    (``citus_shared_dsn``, its coordinator's DSN) for a test that asks for it:
    ``@pytest.mark.parametrize("dsn", ["postgres", "citus"], indirect=True)``. The
    sessions left on it are ended (as the ``DROP DATABASE … WITH (FORCE)`` of a database
    of the test's own did) and it is reset (``tests.pg.reset``: every table emptied, the
    day partitions dropped, the sequencer and counters at 0), so the schema is made once a
    process, not once a test: a new database and its schema cost 2-5 s a test on
    PostgreSQL and 13-22 s on Citus at load 8-16, its drop 1-8 s (docs/testing.md)."""
    on_citus = getattr(request, "param", "postgres") == "citus"
    url: str = request.getfixturevalue("citus_shared_dsn" if on_citus else "pg_shared_dsn")
    asyncio.run(_fresh(url))
    return url


async def _fresh(url: str) -> None:
    await end_other_sessions(url)
    await reset(url)


@pytest.fixture
def pages_per_host() -> int:
    """Pages of each of the test web's 12 hosts (about 37 requests each, so 11 s of a
    Crawl-delay host's time: the whole crawl's length, since the hosts go in parallel).
    A test that needs hosts still busy a while after some event asks for more with
    ``@pytest.mark.parametrize("pages_per_host", [30])``."""
    return 15


@pytest.fixture
async def cluster(dsn: str, tmp_path: Path, pages_per_host: int,
                  request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    spec = default_web(n_hosts=12, pages_per_host=pages_per_host, crawl_delay=0.3,
                       latency=0.02, domain=spread_domain(12))
    on_citus = getattr(request.node, "callspec", None) is not None and \
        request.node.callspec.params.get("dsn") == "citus"
    async with serving(dsn, tmp_path, spec,
                       lease_ttl=CITUS_TTL if on_citus else TTL) as cluster:
        yield cluster


@pytest.fixture
def own_citus() -> Iterator[CitusCluster]:
    """A coordinator and two worker nodes of the test's own (a node may be stopped or
    added mid-test; the session's ``citus`` fixture is not touched)."""
    with citus_cluster(workers=2) as cluster:
        yield cluster


@pytest.fixture
async def crawl_db(own_citus: CitusCluster) -> AsyncIterator[OwnCitus]:
    name = "courtier_nodes"
    dsn = await own_citus.create_database(name)
    yield OwnCitus(own_citus, name, dsn)
