"""A call that meets a pooled connection whose session the server has just ended.

When the server ends a session (``pg_terminate_backend``, a restart, the stalled-
transaction timeout) asyncpg reads its FATAL message and the close of the socket apart,
and the pool hands the connection out in between: the next statement fails at once with
"cannot switch to state 15; another operation (2) is in progress" (2: asyncpg still
waiting for the end of an exchange nobody started). Seen in every cluster run with
connection cuts, on heartbeats, IP slots, commits and refills: each cost its worker a
pause (a refill, its shards' reset), though nothing of the call had reached the server.
The store now runs such a call again, once, on a fresh connection, a write too.

The moment is held open by a proxy that delivers the server's last bytes and keeps the
close back (:class:`EndHoldingProxy`). Seen red on the old ``PostgresStore._run`` (a
write never run again): every case fails with the message above (the transaction's case
under "cannot call Transaction.__aexit__(): the underlying connection is closed").
"""

from __future__ import annotations

import asyncio
import termios
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncpg
import pytest

from courtier.core.clock import VirtualClock
from courtier.store.postgres import PostgresStore
from courtier.store.postgres._rows import Conn
from tests.integration.store.end_holding_proxy import POLL, EndHoldingProxy, queued
from tests.integration.store.rows import T0, url_row
from tests.pg import ADMIN_DSN, PG_HOST, PG_PORT, PG_USER, truncate

pytestmark = pytest.mark.timeout(120)

DEADLINE = 60.0  # seconds a wait for the proxy or the client may take (a hang guard)
WORKERS_ROW = "SELECT count(*) FROM workers WHERE worker_id = 'w1'"


@dataclass
class Ending:
    """A store whose one pooled connection goes through the proxy, and a way to end it."""

    store: PostgresStore
    database: str
    proxy: EndHoldingProxy
    admin: asyncpg.Connection
    client_socket: object

    async def end_the_session(self) -> None:
        """The server ends the store's session; return once the client has read the
        server's last message, the close held back by the proxy."""
        self.proxy.hold_ends = True
        cut = await self.admin.fetch("SELECT pg_terminate_backend(pid) AS cut"
                                     " FROM pg_stat_activity WHERE datname = $1",
                                     self.database)
        assert [row["cut"] for row in cut] == [True]
        await asyncio.wait_for(self.proxy.ended.wait(), DEADLINE)
        loop = asyncio.get_running_loop()
        end = loop.time() + DEADLINE
        while queued(self.client_socket, termios.FIONREAD):
            assert loop.time() < end, "the client never read the server's last message"
            await asyncio.sleep(POLL)

    async def count(self, sql: str) -> int:
        check = await asyncpg.connect(f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/"
                                      f"{self.database}", timeout=10)
        try:
            return int(await check.fetchval(sql))
        finally:
            await check.close()


@asynccontextmanager
async def ending(dsn: str) -> AsyncIterator[Ending]:
    await truncate(dsn)
    database = dsn.rsplit("/", 1)[1]
    async with EndHoldingProxy((PG_HOST, PG_PORT)) as proxy:
        # one connection, so the call after the end is given the connection that ended
        store = PostgresStore(f"postgresql://{PG_USER}@127.0.0.1:{proxy.port}/{database}",
                              clock=VirtualClock(T0), min_size=1, max_size=1)
        await store.open()
        admin = await asyncpg.connect(ADMIN_DSN, timeout=10)
        try:
            pool = store._pool
            assert pool is not None
            conn = await pool.acquire()
            client_socket = conn._transport.get_extra_info("socket")
            await pool.release(conn)
            yield Ending(store, database, proxy, admin, client_socket)
        finally:
            proxy.release_ends()
            await admin.close()
            await store.close()


async def _heartbeat(store: PostgresStore) -> None:
    await store.heartbeat("w1", 1.0, {}, T0)


async def _add_url(store: PostgresStore) -> None:
    await store.add_urls([url_row("http://ended.test/")])


CALLS: dict[str, tuple[Callable[[PostgresStore], Awaitable[None]], str]] = {
    # a write in a transaction: its BEGIN meets the ended session
    "heartbeat": (_heartbeat, WORKERS_ROW),
    # a write of one statement, without a transaction
    "add_urls": (_add_url, "SELECT count(*) FROM urls WHERE url = 'http://ended.test/'"),
}


@pytest.mark.parametrize("case", sorted(CALLS))
async def test_a_write_given_a_connection_the_server_just_ended_goes_through(
        pg_module_dsn: str, case: str) -> None:
    call, stored = CALLS[case]
    async with ending(pg_module_dsn) as it:
        await _heartbeat(it.store)  # the connection in use, then idle in the pool
        await it.end_the_session()
        await call(it.store)
        assert await it.count(stored) == 1


async def test_a_transaction_whose_session_ends_between_its_statements_runs_again(
        pg_module_dsn: str) -> None:
    """The session ends after the transaction's first statement: the second is refused,
    the first was never committed (the server rolled it back with the session), and the
    call runs again on a fresh connection; its INSERT would meet the first one's row
    (a unique key) had that been committed."""
    runs = 0
    async with ending(pg_module_dsn) as it:

        async def job(conn: Conn) -> None:
            nonlocal runs
            runs += 1
            await conn.execute(
                "INSERT INTO workers (worker_id, weight, heartbeat_at, started_at, info)"
                " VALUES ('w1', 1, 0, 0, '{}')")
            if runs == 1:
                await it.end_the_session()
            await conn.fetchval("SELECT count(*) FROM workers")

        await it.store._run("a two-statement write", job)
        assert runs == 2
        assert await it.count(WORKERS_ROW) == 1
