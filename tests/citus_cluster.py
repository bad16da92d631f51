"""A local Citus cluster for tests and benchmarks: a coordinator and worker nodes.

Each node is a throwaway PostgreSQL server of its own (:mod:`tests.pg_server`: a
temporary directory, trust authentication, superuser ``root``, a free port on
127.0.0.1, run as the ``postgres`` OS user when the tests run as root) started with
``shared_preload_libraries = 'citus'`` and ``wal_level = logical`` (the rebalancer
moves shards by logical replication). Citus keeps its node list per database, so
:meth:`CitusCluster.create_database` creates the database on every node, creates the
extension in each, names the coordinator (``citus_set_coordinator_host``) and adds the
workers (``citus_add_node``); courtier itself never runs any of that.

When the extension is not installed (``citus.so`` missing from the server's library
folder: ``../shared/vendor/citus/build.sh`` installs it) or no throwaway server can
run, the test is skipped with the reason, except under CI (tests/ci.py), where it
fails.

``citus.shard_count`` is 8 on the coordinator (Citus's default is 32): each
distributed table is split in 8 Citus shards (4 per worker node), which keeps the
schema's creation to seconds on two shared cores and still spreads every table over
both worker nodes. Production keeps whatever the operator configures.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path

import asyncpg

from tests.ci import required_under_ci
from tests.pg_server import PG_BIN, ThrowawayServer, throwaway_server

#: postgresql.conf lines of every node (beyond tests/pg_server.py's defaults)
NODE_SETTINGS = {
    "shared_preload_libraries": "'citus'",
    "wal_level": "logical",
    "max_connections": "150",
    "max_replication_slots": "20",
    "max_wal_senders": "20",
    "citus.shard_count": "8",
}
HOST = "127.0.0.1"


def citus_library_dir() -> Path:
    """The server's extension library folder (``pg_config --pkglibdir``; Debian's
    ``/usr/lib/postgresql/<v>/lib`` beside the binaries when pg_config is absent)."""
    pg_config = PG_BIN / "pg_config"
    if pg_config.is_file():
        done = subprocess.run([str(pg_config), "--pkglibdir"], capture_output=True,
                              text=True, timeout=30, check=False)
        if done.returncode == 0 and done.stdout.strip():
            return Path(done.stdout.strip())
    return PG_BIN.parent / "lib"


def citus_missing() -> str | None:
    """Why no Citus node can start here, or None."""
    library = citus_library_dir() / "citus.so"
    if not library.is_file():
        return (f"the Citus extension is not installed ({library} is missing; "
                "../shared/vendor/citus/build.sh builds and installs it)")
    return None


class CitusCluster:
    """A coordinator and its worker nodes, each a :class:`ThrowawayServer`. ``stack``: the
    stack the nodes were started on (a node started later, :meth:`start_worker`, is
    stopped with the others)."""

    def __init__(self, coordinator: ThrowawayServer, workers: list[ThrowawayServer],
                 stack: ExitStack | None = None,
                 settings: Mapping[str, str] = NODE_SETTINGS) -> None:
        self.coordinator = coordinator
        self.workers = workers
        self._stack = stack
        self._settings = settings  # every node's postgresql.conf lines

    @property
    def nodes(self) -> list[ThrowawayServer]:
        return [self.coordinator, *self.workers]

    async def _on(self, server: ThrowawayServer, database: str, *sql: str) -> None:
        conn = await asyncpg.connect(server.dsn(database), timeout=30)
        try:
            for statement in sql:
                await conn.execute(statement)
        finally:
            await conn.close()

    async def create_database(self, name: str) -> str:
        """The database ``name`` on every node with the extension, the coordinator named
        and every worker added; the coordinator's DSN of it."""
        for node in self.nodes:
            await node.admin(f'CREATE DATABASE "{name}"')
            await self._on(node, name, "CREATE EXTENSION citus")
        await self._on(self.coordinator, name,
                       f"SELECT citus_set_coordinator_host('{HOST}', {self.coordinator.port})",
                       *(f"SELECT citus_add_node('{HOST}', {worker.port})"
                         for worker in self.workers))
        return self.coordinator.dsn(name)

    def start_worker(self) -> ThrowawayServer:
        """Start one more worker node (blocking; not yet in any database's node list:
        :meth:`add_worker`). Stopped when the cluster is."""
        assert self._stack is not None, "a cluster started by citus_cluster()"
        node = self._stack.enter_context(throwaway_server(
            self._settings, prefix=f"courtier-citus-worker{len(self.workers)}-"))
        self.workers.append(node)
        return node

    async def add_worker(self, node: ThrowawayServer, name: str) -> None:
        """Add ``node`` to the database ``name``'s cluster (a running crawl's): the
        database and the extension on the node, then ``citus_add_node`` on the
        coordinator. Shards move to it only when rebalanced."""
        await node.admin(f'CREATE DATABASE "{name}"')
        await self._on(node, name, "CREATE EXTENSION citus")
        await self._on(self.coordinator, name,
                       f"SELECT citus_add_node('{HOST}', {node.port})")

    async def drop_database(self, name: str) -> None:
        for node in self.nodes:
            await node.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    @contextmanager
    def database(self, label: str = "citus") -> Iterator[str]:
        """A new database of the cluster (``courtier_<label>_<random>``); its coordinator
        DSN; dropped on every node afterwards."""
        name = f"courtier_{label}_{uuid.uuid4().hex[:12]}"
        asyncio.run(self.create_database(name))
        try:
            yield self.coordinator.dsn(name)
        finally:
            asyncio.run(self.drop_database(name))


@contextmanager
def citus_cluster(workers: int = 2,
                  settings: Mapping[str, str] | None = None) -> Iterator[CitusCluster]:
    """Start a coordinator and ``workers`` worker nodes; yield them; stop them all.
    ``settings``: postgresql.conf lines of every node beyond (or over) ``NODE_SETTINGS``."""
    reason = citus_missing()
    if reason is not None:
        required_under_ci(reason)
    conf = {**NODE_SETTINGS, **(settings or {})}
    with ExitStack() as stack:
        coordinator = stack.enter_context(
            throwaway_server(conf, prefix="courtier-citus-coordinator-"))
        nodes = [stack.enter_context(
                     throwaway_server(conf, prefix=f"courtier-citus-worker{i}-"))
                 for i in range(workers)]
        yield CitusCluster(coordinator, nodes, stack, conf)
