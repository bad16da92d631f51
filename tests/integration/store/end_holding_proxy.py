"""A loopback TCP proxy to PostgreSQL that can hold back the end of a server's stream.

When the server ends a session (``pg_terminate_backend``, a restart, an idle timeout) it
sends its last message (a FATAL ``ErrorResponse``) and closes the socket. A client reads
the two apart: between them it holds a connection whose session is over but which still
looks open. :class:`EndHoldingProxy` makes that moment last: with ``hold_ends`` set, a
server stream that ends has every byte delivered to the client's socket and :attr:`ended` set,
while the close reaches the client only on :meth:`release_ends` (or :meth:`close`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import struct
import termios

#: seconds between looks at a socket's queue
POLL = 0.01


def queued(sock: object, request: int) -> int:
    """A socket's byte count for ``request``: ``termios.FIONREAD`` (received, not yet
    read by its owner) or ``termios.TIOCOUTQ`` (sent, not yet taken in by the peer)."""
    fileno = sock.fileno()  # type: ignore[attr-defined]
    return int(struct.unpack("i", fcntl.ioctl(fileno, request, b"\0" * 4))[0])


class EndHoldingProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target`` (host, port), one upstream per client."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.hold_ends = False
        #: set once a server stream ended while ``hold_ends`` (all its bytes forwarded)
        self.ended = asyncio.Event()
        self._released = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def port(self) -> int:
        assert self._server is not None, "EndHoldingProxy is not started"
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    def release_ends(self) -> None:
        """Let every held close through (and those to come)."""
        self._released.set()

    async def close(self) -> None:
        self.release_ends()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for writer in self._writers:
            writer.close()
        await asyncio.gather(*self._pumps, return_exceptions=True)

    async def __aenter__(self) -> EndHoldingProxy:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def _accept(self, client_r: asyncio.StreamReader,
                      client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(*self.target)
        self._writers += [client_w, server_w]
        for pump in (self._pump(client_r, server_w, from_server=False),
                     self._pump(server_r, client_w, from_server=True)):
            task = asyncio.create_task(pump)
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    from_server: bool) -> None:
        writer.transport.set_write_buffer_limits(high=0)  # drain() waits for an empty buffer
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
            if from_server and self.hold_ends:
                # every byte is in the client's socket before ``ended`` says so
                sock = writer.get_extra_info("socket")
                while queued(sock, termios.TIOCOUTQ):  # noqa: ASYNC110 (a kernel queue: no event)
                    await asyncio.sleep(POLL)
                self.ended.set()
                await self._released.wait()
        writer.close()
