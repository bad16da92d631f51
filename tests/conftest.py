"""Shared test helpers.

Public conformance vectors live in ``../shared/conformance`` beside the
checkout (CI has them). Tests that read them skip, saying so, when the folder
is absent; under CI (``CI`` set to any true value: tests/ci.py) an absent folder is an
error instead, and a CI session in which any test was skipped fails (``SkipGuard``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.ci import SkipGuard, ci_is_on, required_under_ci

if TYPE_CHECKING:
    from tests.citus_cluster import CitusCluster

# No test resolves a name through the system's DNS: a name missing from a test's
# hosts overrides fails (courtier.fetch.resolver); worker subprocesses inherit this.
os.environ["COURTIER_SYSTEM_DNS"] = "off"

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFORMANCE_DIR = Path(
    os.environ.get("COURTIER_CONFORMANCE_DIR", REPO_ROOT.parent / "shared" / "conformance")
)


def conformance_file(relative: str) -> Path:
    """Path of a conformance vector file; skips the test (or fails in CI) when absent."""
    path = CONFORMANCE_DIR / relative
    if not path.exists():
        required_under_ci(f"conformance vectors not present ({path}); "
                          "COURTIER_CONFORMANCE_DIR names their folder")
    return path


def pytest_configure(config: pytest.Config) -> None:
    """Under CI, a session that skipped any test fails, listing them (tests/ci.py)."""
    config.pluginmanager.register(SkipGuard(ci_is_on()), "courtier-skip-guard")


#: test files handed to the test processes first (docs/testing.md, "How the time is kept
#: down"): the real-process cluster tests, the suite's longest files of one to three tests
FIRST = "tests/integration/cluster/"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The cluster tests first, the rest in the usual order (stable sort). The README's
    command keeps this order (``--no-loadscope-reorder``; xdist would otherwise hand out
    the files with most tests first, which left the cluster files, one to three tests
    each, to the end, where each process took up to three of them while the others had
    nothing left to run); the many short unit tests come last and fill the end."""
    items.sort(key=lambda item: not item.nodeid.startswith(FIRST))


@pytest.fixture(scope="module")
def pg_module_dsn() -> Iterator[str]:
    """A PostgreSQL database for one test module (created, then dropped); see tests/pg.py.

    Tests sharing it call ``tests.pg.truncate`` first (the contract fixture does)."""
    from tests.pg import temporary_database

    with temporary_database("mod") as dsn:
        yield dsn


@pytest.fixture(scope="session")
def pg_shared_dsn() -> Iterator[str]:
    """One PostgreSQL database of the test process that the contract modules take in
    turn (``pg_contract_dsn``)."""
    from tests.pg import temporary_database

    with temporary_database("shared") as dsn:
        yield dsn


@pytest.fixture(scope="module")
def pg_contract_dsn(pg_shared_dsn: str) -> str:
    """The contract suites' PostgreSQL database for one module: the process's shared one
    (``pg_shared_dsn``) reset (``tests.pg.reset``), so a module starts as on a new
    database whose schema is made, without making the schema again."""
    import asyncio

    from tests.pg import reset

    asyncio.run(reset(pg_shared_dsn))
    return pg_shared_dsn


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    """A PostgreSQL database of its own for one test (created, then dropped)."""
    from tests.pg import temporary_database

    with temporary_database("fn") as dsn:
        yield dsn


@pytest.fixture(params=["sqlite", "postgres"])
def crawl_store(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The ``--store`` of an end-to-end crawl: None (SQLite under --data), a fresh
    PostgreSQL database, or a fresh database of the session's local Citus cluster (its
    coordinator's DSN) for a test that asks for it:
    ``@pytest.mark.parametrize("crawl_store", ["sqlite", "postgres", "citus"],
    indirect=True)``."""
    if request.param == "sqlite":
        yield None
        return
    if request.param == "citus":
        cluster: CitusCluster = request.getfixturevalue("citus")
        with cluster.database("crawl") as dsn:
            yield dsn
        return
    from tests.pg import temporary_database

    with temporary_database("crawl") as dsn:
        yield dsn


@pytest.fixture(scope="session")
def citus() -> Iterator[CitusCluster]:
    """A local Citus cluster (a coordinator and two worker nodes, tests/citus_cluster.py),
    started once for the session by the first test that asks for it; skipped with the
    reason when Citus is not installed, failed under CI."""
    from tests.citus_cluster import citus_cluster

    with citus_cluster(workers=2) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def citus_shared_dsn(citus: CitusCluster) -> Iterator[str]:
    """One database of the process's Citus cluster that the modules asking for
    ``citus_module_dsn`` take in turn (docs/testing.md, "The time budget": a new
    database and courtier's schema distributed in it cost 7 s at load 4, ~20 s at
    load 10, once per module before)."""
    with citus.database("mod") as dsn:
        yield dsn


@pytest.fixture(scope="module")
def citus_module_dsn(request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of the Citus cluster for one test module (its coordinator's DSN): the
    process's shared one (``citus_shared_dsn``) reset for the module
    (``tests.pg.reset``: emptied, the retention's day partitions dropped), so a module
    starts as on a new database whose schema is made; a module's tests empty it
    before each test as before. ``COURTIER_TEST_CITUS_DSN`` names a database of a
    running coordinator to use instead (nothing is started or dropped: for iterating
    on the Citus forms of the schema)."""
    given = os.environ.get("COURTIER_TEST_CITUS_DSN")
    if given:
        yield given
        return
    import asyncio

    from tests.pg import reset

    dsn: str = request.getfixturevalue("citus_shared_dsn")
    asyncio.run(reset(dsn))
    yield dsn


@pytest.fixture
def citus_dsn(citus: CitusCluster) -> Iterator[str]:
    """A database of the Citus cluster of its own for one test (its coordinator's DSN)."""
    with citus.database("fn") as dsn:
        yield dsn
