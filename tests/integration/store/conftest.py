"""The ``store`` fixture of the PostgreSQL store tests: one module's database, emptied
before each test, opened on a virtual clock at :data:`rows.T0`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from courtier.core.clock import VirtualClock
from courtier.store.postgres import PostgresStore
from tests.integration.store.rows import T0
from tests.pg import truncate


@pytest.fixture
async def store(pg_module_dsn: str) -> AsyncIterator[PostgresStore]:
    await truncate(pg_module_dsn)
    s = PostgresStore(pg_module_dsn, clock=VirtualClock(T0))
    await s.open()
    try:
        yield s
    finally:
        await s.close()
