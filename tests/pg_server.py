"""A throwaway PostgreSQL server of one test, for tests that stop or restart the server.

The shared server on 127.0.0.1:5432 (tests/pg.py) serves other suites at the same
time and must never be restarted, so a test that restarts PostgreSQL starts its own:
``initdb`` into a temporary directory, trust authentication, superuser ``root``,
listening on 127.0.0.1 only on a free port below the kernel's ephemeral range (so no
``bind(port 0)`` elsewhere takes it while the server is down), its unix socket inside
that directory. PostgreSQL refuses to run as root, so when the tests run as root the
server's commands run as the ``postgres`` OS user (``runuser``), which owns the
directory. :func:`throwaway_server` always stops the server and removes the directory.

When the binaries (``COURTIER_TEST_PG_BIN``, default the newest
/usr/lib/postgresql/<version>/bin) or the ``postgres`` user are missing, the test is
skipped with the reason, except under CI (tests/ci.py), where it fails (as tests/pg.py does
for the shared server).

``fsync = off``: an immediate stop kills the server's processes, not the machine, so
everything written to the kernel survives it; the crash recovery on the next start is
the same with or without fsync, and the test does not wait on a shared disk.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

import asyncpg

from tests.ci import required_under_ci


def _newest_bin() -> Path:
    """The newest /usr/lib/postgresql/<version>/bin (Debian's layout), else version 15's."""
    found = sorted((p for p in Path("/usr/lib/postgresql").glob("*/bin")
                    if p.parent.name.isdigit()), key=lambda p: int(p.parent.name))
    return found[-1] if found else Path("/usr/lib/postgresql/15/bin")


_PG_BIN_SET = os.environ.get("COURTIER_TEST_PG_BIN")
PG_BIN = Path(_PG_BIN_SET) if _PG_BIN_SET else _newest_bin()
PG_OS_USER = "postgres"  # who runs the server when the tests run as root
START_WAIT = 120         # seconds pg_ctl waits for a start or a stop (-t)

#: what the server log says when a start had to recover from an unclean stop
RECOVERY_LINE = "database system was not properly shut down; automatic recovery in progress"


class ThrowawayServer:
    """One PostgreSQL server in ``root`` (a temporary directory) on 127.0.0.1:``port``."""

    def __init__(self, root: Path, port: int, owner: str | None,
                 settings: Mapping[str, str] | None = None) -> None:
        self.root = root
        self.port = port
        self._owner = owner  # the OS user the server runs as (None: this process's user)
        self._settings = dict(settings or {})  # postgresql.conf lines beyond the defaults
        self.data = root / "data"
        self.log = root / "server.log"

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://root@127.0.0.1:{self.port}/{database}"

    # ---- life cycle (blocking: call the async forms from a running event loop) ------

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "root", "-E", "UTF8",
                  "--locale=C", "--no-sync")
        settings = {
            "port": str(self.port), "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.root}'", "fsync": "off",
            "max_connections": "60", "shared_buffers": "32MB", "logging_collector": "off",
        }
        settings.update(self._settings)
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("\n# throwaway test server (tests/pg_server.py)\n")
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w",
                  "-t", str(START_WAIT), "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", str(START_WAIT), "-m", mode,
                  "stop")

    def restart_immediate(self) -> None:
        """``pg_ctl restart -m immediate``: every backend is killed without a checkpoint,
        the next start runs crash recovery."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w",
                  "-t", str(START_WAIT), "-m", "immediate", "restart")

    async def astart(self) -> None:
        await asyncio.to_thread(self.start)

    async def astop_immediate(self) -> None:
        await asyncio.to_thread(self.stop, "immediate")

    async def arestart_immediate(self) -> None:
        await asyncio.to_thread(self.restart_immediate)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill_leftovers(self) -> None:
        """SIGKILL the postmaster named in postmaster.pid (when ``pg_ctl stop`` failed)."""
        pid_file = self.data / "postmaster.pid"
        with suppress(OSError, ValueError, IndexError):
            pid = int(pid_file.read_text().split()[0])
            os.kill(pid, signal.SIGKILL)

    def _run(self, program: str, *args: str) -> None:
        command = [str(PG_BIN / program), *args]
        if self._owner is not None:
            command = ["runuser", "-u", self._owner, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.root,
                              timeout=START_WAIT + 30, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{program} {' '.join(args)} failed ({done.returncode}): "
                               f"{done.stdout}{done.stderr}\n--- server log ---\n"
                               f"{self.log_text()[-3000:]}")

    # ---- what the server says -------------------------------------------------------

    async def admin(self, sql: str, *args: object) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.dsn(), timeout=10)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def create_database(self, name: str) -> str:
        await self.admin(f'CREATE DATABASE "{name}"')
        return self.dsn(name)


def _missing() -> str | None:
    """Why no throwaway server can run here, or None."""
    for program in ("initdb", "pg_ctl", "postgres"):
        if not (PG_BIN / program).is_file():
            return f"{PG_BIN / program} is missing (PostgreSQL server binaries)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(PG_OS_USER)
        except KeyError:
            return f"no OS user {PG_OS_USER!r} to run PostgreSQL as (it refuses root)"
        if shutil.which("runuser") is None:
            return "runuser is missing (needed to run PostgreSQL as the postgres user)"
    return None


def _unavailable(reason: str) -> None:
    required_under_ci(f"throwaway PostgreSQL server: {reason}")


def free_port() -> int:
    """A port free on 127.0.0.1 now, below the ephemeral range (20000–32767)."""
    for _ in range(200):
        port = random.randint(20000, 32767)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port in 20000-32767 on 127.0.0.1")


@contextmanager
def throwaway_server(settings: Mapping[str, str] | None = None,
                     prefix: str = "courtier-pg-") -> Iterator[ThrowawayServer]:
    """Initialise and start a server; yield it; stop it and remove its directory.
    ``settings``: postgresql.conf lines added to (or overriding) the defaults."""
    reason = _missing()
    if reason is not None:
        _unavailable(reason)
    owner = PG_OS_USER if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        if owner is not None:
            user = pwd.getpwnam(owner)
            os.chown(root, user.pw_uid, user.pw_gid)
        server = ThrowawayServer(root, free_port(), owner, settings)
        server.init()
        for attempt in range(3):  # another process may have taken the port meanwhile
            try:
                server.start()
                break
            except RuntimeError:
                if attempt == 2:
                    raise
                server.port = free_port()
                with (server.data / "postgresql.conf").open("a") as conf:
                    conf.write(f"port = {server.port}\n")
        try:
            yield server
        finally:
            try:
                server.stop("immediate")
            except (RuntimeError, subprocess.TimeoutExpired):
                server.kill_leftovers()
    finally:
        shutil.rmtree(root, ignore_errors=True)
