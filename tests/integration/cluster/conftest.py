"""Fixtures of the real-process cluster tests: a fresh database and a test web each."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from courtier.testweb.spec import default_web
from tests.integration.cluster.harness import Cluster, serving
from tests.pg import temporary_database


@pytest.fixture
def dsn() -> Iterator[str]:
    with temporary_database("cluster") as url:
        yield url


@pytest.fixture
def pages_per_host() -> int:
    """Pages of each of the test web's 12 hosts (about 37 requests each, so 11 s of a
    Crawl-delay host's time: the whole crawl's length, since the hosts go in parallel).
    A test that needs hosts still busy a while after some event asks for more with
    ``@pytest.mark.parametrize("pages_per_host", [30])``."""
    return 15


@pytest.fixture
async def cluster(dsn: str, tmp_path: Path, pages_per_host: int) -> AsyncIterator[Cluster]:
    spec = default_web(n_hosts=12, pages_per_host=pages_per_host, crawl_delay=0.3,
                       latency=0.02)
    async with serving(dsn, tmp_path, spec) as cluster:
        yield cluster
