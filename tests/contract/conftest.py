"""Store fixtures of the contract suites: every test runs against every Store.

A backend is a factory: a function of the test's request and temp folder returning
a zero-argument callable that builds a *new, unopened* store over the same backing
data each time it is called (so durability can be tested by closing one instance
and opening another). PostgreSQL uses one database per test process, reset at each
module's start (``pg_contract_dsn``, tests/pg.py ``reset``) and emptied before each
test; so does Citus (``citus_module_dsn``), the same store on a database of a local
Citus cluster (a coordinator and two worker nodes, tests/citus_cluster.py), whose
tables the store distributes when it opens (store/postgres/_citus.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from courtier.core.clock import VirtualClock
from courtier.store.base import Store
from courtier.store.memory import MemoryStore
from courtier.store.postgres import PostgresStore
from courtier.store.sqlite import SqliteStore

T0 = 1_700_000_000.0

StoreMaker = Callable[[], Store]


def _sqlite_factory(request: pytest.FixtureRequest, tmp: Path,
                    clock: VirtualClock) -> StoreMaker:
    path = tmp / "data" / "crawl.sqlite"
    return lambda: SqliteStore(path, clock=clock)


def _memory_factory(request: pytest.FixtureRequest, tmp: Path,
                    clock: VirtualClock) -> StoreMaker:
    # one object is its own "backing data": reopening it sees what was written
    store = MemoryStore(clock=clock)
    return lambda: store


def _postgres_factory(request: pytest.FixtureRequest, tmp: Path,
                      clock: VirtualClock) -> StoreMaker:
    from tests.pg import truncate

    dsn: str = request.getfixturevalue("pg_contract_dsn")
    asyncio.run(truncate(dsn))
    return lambda: PostgresStore(dsn, clock=clock, max_size=4)


def _citus_factory(request: pytest.FixtureRequest, tmp: Path,
                   clock: VirtualClock) -> StoreMaker:
    from tests.pg import truncate

    dsn: str = request.getfixturevalue("citus_module_dsn")
    asyncio.run(truncate(dsn))
    return lambda: PostgresStore(dsn, clock=clock, max_size=4)


FACTORIES: dict[str, Callable[[pytest.FixtureRequest, Path, VirtualClock], StoreMaker]] = {
    "memory": _memory_factory,
    "sqlite": _sqlite_factory,
    "postgres": _postgres_factory,
    "citus": _citus_factory,
}


@pytest.fixture
def store_clock() -> VirtualClock:
    """The clock of the test's store (its event times, the memory store's cluster times),
    starting at :data:`T0`."""
    return VirtualClock(T0)


#: contract tests not run on Citus, each with the reason (docs/scale-out.md, "Citus: as
#: built"); they are deselected (pytest counts them), not skipped
CITUS_GAPS: dict[str, str] = {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the Citus runs of :data:`CITUS_GAPS`."""
    gaps = [item for item in items if item.name.endswith("[citus]")
            and item.name.removesuffix("[citus]") in CITUS_GAPS]
    if gaps:
        config.hook.pytest_deselected(items=gaps)
        items[:] = [item for item in items if item not in gaps]


@pytest.fixture(params=sorted(FACTORIES))
def make_store(request: pytest.FixtureRequest, tmp_path: Path,
               store_clock: VirtualClock) -> StoreMaker:
    return FACTORIES[request.param](request, tmp_path, store_clock)


@pytest.fixture
async def store(make_store: StoreMaker) -> AsyncIterator[Store]:
    s = make_store()
    await s.open()
    try:
        yield s
    finally:
        await s.close()
