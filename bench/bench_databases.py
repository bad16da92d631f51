"""Plain PostgreSQL against Citus in one bench run: two throwaway database back-ends.

``plain_and_citus()`` starts a throwaway PostgreSQL server (tests/pg_server.py: the
installed server binaries, a temporary directory, a free loopback port) and the local
Citus cluster of tests/citus_cluster.py (a coordinator and two worker nodes, each a
throwaway server of its own), every server with the same per-node settings, and
stops and removes them all at the end. Each back-end creates and drops the bench's
databases (on Citus: on every node, the extension in each, the workers added) and
says how many CPU-seconds its servers have spent so far.

The CPU is every process of each server, read from /proc: the postmaster's own time,
the time of its children that have exited (``cutime + cstime``: the kernel adds an
exited child's time to its parent's when the postmaster reaps it, so backends that
came and went between two readings are counted exactly), and the time of its live
children (backends, the WAL writer, the checkpointer, Citus's maintenance daemons).
The difference between two readings is what the back-end's servers spent between
them, whichever database, node or process did the work.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.citus_cluster import NODE_SETTINGS, CitusCluster, citus_cluster
from tests.pg_server import ThrowawayServer, throwaway_server

#: per-node settings beyond tests/pg_server.py's defaults, the same on every server of
#: both back-ends (shared_buffers as the shared server's default; fsync off as every
#: throwaway server: the figures are the statements' work, not the disk's)
BENCH_SETTINGS = {"shared_buffers": "128MB", "max_connections": "150"}


def _stat(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()


def server_cpu_s(server: ThrowawayServer) -> float:
    """CPU-seconds of every process of ``server`` so far (its postmaster, the children it
    reaped, its live children). A child reaped while its siblings are read would be
    missed (no longer a child, not yet in ``cutime`` as read): the reading is taken
    again until the postmaster's ``cutime + cstime`` stays the same across it."""
    tick = os.sysconf("SC_CLK_TCK")
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    while True:
        fields = _stat(postmaster)
        own = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
        children = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                child = _stat(int(entry.name))
            except (OSError, ValueError):
                continue  # exited and reaped meanwhile: the check below sees it
            if int(child[1]) == postmaster:
                children += int(child[11]) + int(child[12])
        again = _stat(postmaster)
        if (int(again[13]), int(again[14])) == (int(fields[13]), int(fields[14])):
            return (own + children) / tick


class PlainDatabases:
    """Databases of one throwaway PostgreSQL server."""

    label = "PostgreSQL"

    def __init__(self, server: ThrowawayServer) -> None:
        self.server = server
        self.nodes = 1

    async def create(self, name: str) -> str:
        return await self.server.create_database(name)

    async def drop(self, name: str) -> None:
        await self.server.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def cpu_s(self) -> float:
        return server_cpu_s(self.server)


class CitusDatabases:
    """Databases of a local Citus cluster (``nodes``: its worker nodes, which hold the
    rows; the coordinator's CPU counts in :meth:`cpu_s` too)."""

    label = "Citus"

    def __init__(self, cluster: CitusCluster) -> None:
        self.cluster = cluster
        self.nodes = len(cluster.workers)

    async def create(self, name: str) -> str:
        return await self.cluster.create_database(name)

    async def drop(self, name: str) -> None:
        await self.cluster.drop_database(name)

    def cpu_s(self) -> float:
        return sum(server_cpu_s(node) for node in self.cluster.nodes)


Databases = PlainDatabases | CitusDatabases


def _plain_settings() -> dict[str, str]:
    return {k: v for k, v in {**NODE_SETTINGS, **BENCH_SETTINGS}.items()
            if "citus" not in k and "citus" not in v}


@contextmanager
def plain_only() -> Iterator[PlainDatabases]:
    """The throwaway PostgreSQL server of :func:`plain_and_citus`, alone: every process
    of it is this bench's (the shared server's exited backends are other sessions' too)."""
    with throwaway_server(_plain_settings(), prefix="courtier-bench-plain-") as plain:
        yield PlainDatabases(plain)


@contextmanager
def plain_and_citus(workers: int = 2) -> Iterator[tuple[PlainDatabases, CitusDatabases]]:
    """A throwaway PostgreSQL server and a Citus cluster of ``workers`` worker nodes,
    the same settings on every server; stopped and removed afterwards."""
    with ExitStack() as stack:
        plain = stack.enter_context(throwaway_server(_plain_settings(),
                                                     prefix="courtier-bench-plain-"))
        cluster = stack.enter_context(citus_cluster(workers=workers, settings=BENCH_SETTINGS))
        yield PlainDatabases(plain), CitusDatabases(cluster)
