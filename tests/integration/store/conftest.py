"""The ``store`` fixture of the PostgreSQL store tests: one module's database, emptied
before each test, opened on a virtual clock at :data:`rows.T0`; ``citus_store`` the same
on a database of the local Citus cluster (tests/citus_cluster.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from courtier.core.clock import VirtualClock
from courtier.store.postgres import PostgresStore
from tests.integration.store.rows import T0
from tests.pg import truncate


async def _emptied_store(dsn: str) -> AsyncIterator[PostgresStore]:
    await truncate(dsn)
    s = PostgresStore(dsn, clock=VirtualClock(T0))
    await s.open()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def store(pg_module_dsn: str) -> AsyncIterator[PostgresStore]:
    async for s in _emptied_store(pg_module_dsn):
        yield s


@pytest.fixture
async def citus_store(citus_module_dsn: str) -> AsyncIterator[PostgresStore]:
    async for s in _emptied_store(citus_module_dsn):
        yield s
