"""``courtier testweb serve``: the multi-host test web on loopback until stopped.

For trials longer than ``courtier demo`` (a cluster, the API, the dashboard, kill -9 and
resume): the server writes a hosts file (``127.0.0.1 h00.courtier.test`` …, what
``--resolve`` reads) and a seeds file into a folder of its own, prints the crawl commands
that use them, and serves until SIGINT or SIGTERM (exit 0). With ``--access-log FILE``
every request is appended to FILE as one JSON object a line (:func:`read_access_log` turns
them back into :class:`RequestRecord`, for :func:`politeness_violations`): what the site
owner saw, independent of the crawler's own counters.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import signal
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, TextIO

from courtier.core.errors import ConfigError
from courtier.testweb.server import RequestRecord, TestWebServer
from courtier.testweb.site import TestWeb
from courtier.testweb.spec import WebSpec

#: the hosts the test web breaks on purpose, and what each is for
BROKEN_ON_PURPOSE = {
    "500": "its robots.txt answers 500, so a polite crawler fetches nothing else there "
           "(RFC 9309) and its URLs stay unfinished however often the crawl is run again: "
           "it shows how a crawl reports a host it cannot reach",
}


@dataclass(frozen=True, slots=True)
class ServedFiles:
    """The files a served test web writes for the crawler."""

    hosts: Path
    seeds: Path


def write_served_files(web: TestWeb, folder: Path) -> ServedFiles:
    """Write the hosts file and the seeds file of ``web`` into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    files = ServedFiles(folder / "hosts.txt", folder / "seeds.txt")
    files.hosts.write_text(web.hosts_file_text())
    files.seeds.write_text("".join(f"{seed}\n" for seed in web.seeds()))
    return files


def crawl_command(files: ServedFiles, data: Path, *extra: str) -> str:
    """The ``courtier crawl`` command line that crawls the served web into ``data``."""
    words = ["courtier", "crawl", "--resolve", str(files.hosts),
             "--allow-network", "127.0.0.0/8", "--seeds-file", str(files.seeds),
             "--data", str(data), *extra]
    return shlex.join(words)


def broken_hosts_lines(spec: WebSpec) -> list[str]:
    """One line per host broken on purpose, saying what it is for."""
    return [f"{host.name}: {BROKEN_ON_PURPOSE[host.robots]}"
            for host in spec.hosts if host.robots in BROKEN_ON_PURPOSE]


def announcement(server: TestWebServer, files: ServedFiles, folder: Path) -> list[str]:
    """What ``testweb serve`` prints once it listens: where, the files, the commands."""
    spec = server.spec
    cluster = crawl_command(files, folder / "cluster", "--workers", "3",
                            "--store", "postgresql://USER@127.0.0.1:5432/DB")
    return [
        f"courtier testweb: {len(spec.hosts)} hosts on 127.0.0.1:{server.port} "
        f"(h00.courtier.test … mapped to 127.0.0.1 by the hosts file)",
        f"hosts file: {files.hosts}",
        f"seeds file: {files.seeds}",
        "crawl it with:",
        f"  {crawl_command(files, folder / 'crawl')}",
        "a cluster of 3 workers (a PostgreSQL store, see docs/scale-out.md):",
        f"  {cluster}",
        "the live dashboard: add --api 127.0.0.1:8790 and open http://127.0.0.1:8790/",
        *(f"broken on purpose: {line}" for line in broken_hosts_lines(spec)),
        "stop the test web with Ctrl-C (or SIGTERM)",
    ]


class AccessLogWriter:
    """Appends each request to a file as a JSON object a line (written as it ends)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def __call__(self, record: RequestRecord) -> None:
        self._stream.write(json.dumps(asdict(record), separators=(",", ":")) + "\n")


def read_access_log(path: Path) -> list[RequestRecord]:
    """The records of an access log written by ``testweb serve --access-log``."""
    with path.open(encoding="utf-8") as handle:
        return [RequestRecord(**json.loads(line)) for line in handle if line.strip()]


async def serve_until_stopped(spec: WebSpec, port: int, folder: Path,
                              access_log: Path | None, out: TextIO,
                              stop: asyncio.Event | None = None) -> int:
    """Serve ``spec`` until ``stop`` is set or SIGINT/SIGTERM arrives; 0 when stopped so.

    Prints :func:`announcement` to ``out`` once listening and one line when it stops.
    """
    stop = stop if stop is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
    try:
        with contextlib.ExitStack() as files_open:
            log_stream = None
            if access_log is not None:
                try:
                    log_stream = files_open.enter_context(
                        access_log.open("a", encoding="utf-8", buffering=1))
                except OSError as exc:
                    raise ConfigError(f"--access-log {access_log}: {exc.strerror}") from None
            on_request = AccessLogWriter(log_stream) if log_stream is not None else None
            server = TestWebServer(spec, port, on_request=on_request)
            try:
                await server.start()
            except ConfigError as exc:
                cause = exc.__cause__
                why = cause.strerror if isinstance(cause, OSError) and cause.strerror else exc
                raise ConfigError(f"--port {port}: cannot listen on 127.0.0.1: {why} "
                                  f"(--port 0 takes any free port)") from None
            try:
                files = write_served_files(server.web, folder)
                out.write("".join(f"{line}\n" for line in announcement(server, files, folder)))
                out.flush()
                await stop.wait()
            finally:
                await server.stop()
            out.write(f"courtier testweb: stopped after {len(server.log)} requests\n")
            out.flush()
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
    return 0


def run_serve(spec: WebSpec, port: int, folder: Path | None, access_log: Path | None) -> int:
    """``courtier testweb serve``: serve in the foreground until SIGINT/SIGTERM."""
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="courtier-testweb-"))
    elif folder.exists() and not folder.is_dir():
        raise ConfigError(f"--dir {folder}: is a file, not a folder")
    return asyncio.run(serve_until_stopped(spec, port, folder.resolve(), access_log,
                                           sys.stdout))
