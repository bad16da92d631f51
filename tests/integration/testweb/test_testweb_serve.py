"""``courtier testweb serve`` as a user runs it (issue #36): a subprocess that serves the
test web until SIGTERM, prints its hosts file and the crawl command; that printed command,
run as typed, crawls the whole web politely — judged from the server's own access log.

Seen red on a scratch edit (restored since): with the hosts file left unwritten (the
crawl's ``--resolve`` fails: exit 2), with ``--access-log`` records not written (no
expected page in the log), with the SIGTERM handler not installed (exit -15), and with the
printed command lacking ``--allow-network`` (every host blocked, no page fetched).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import re
import shlex
import signal
import socket
import sys
from pathlib import Path

import pytest

from courtier.testweb import TestWeb, default_web, politeness_violations
from courtier.testweb.serve import read_access_log

pytestmark = pytest.mark.timeout(180)

DELAY = 0.1
CRAWL_DELAY = 0.3


def text_lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


async def start_serving(*argv: str) -> tuple[asyncio.subprocess.Process, list[str]]:
    """A ``testweb serve`` process and the lines it printed up to its stop hint."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", *argv, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    lines: list[str] = []
    while not lines or not lines[-1].startswith("stop the test web"):
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line, f"testweb serve ended early: {lines}"
        lines.append(line.decode().rstrip("\n"))
    return proc, lines


async def stop(proc: asyncio.subprocess.Process, sig: int) -> tuple[str, str]:
    """Send ``sig``; the rest of stdout and stderr (SIGKILL only if it never ends)."""
    if proc.returncode is None:
        proc.send_signal(sig)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return out.decode(), err.decode()


async def test_the_printed_crawl_command_crawls_the_served_web_and_sigterm_ends_it(
        tmp_path: Path) -> None:
    access_log = tmp_path / "access.jsonl"
    proc, lines = await start_serving(
        "courtier", "testweb", "serve", "--port", "0", "--hosts", "6", "--pages", "3",
        "--crawl-delay", str(CRAWL_DELAY), "--dir", str(tmp_path / "web"),
        "--access-log", str(access_log))
    try:
        port = int(re.search(r"127\.0\.0\.1:(\d+)", lines[0]).group(1))  # type: ignore[union-attr]
        hosts_file = Path(next(line for line in lines if line.startswith("hosts file: "))
                          .removeprefix("hosts file: "))
        assert "127.0.0.1 h00.courtier.test" in text_lines(hosts_file)
        command = shlex.split(lines[lines.index("crawl it with:") + 1])
        assert command[:2] == ["courtier", "crawl"]
        assert any("h03.courtier.test" in line and "500" in line for line in lines)
        crawl = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "courtier", *command[1:], "--data", str(tmp_path / "data"),
            "--delay", str(DELAY), "--linger", "0", "--progress", "none",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            _, err = await asyncio.wait_for(crawl.communicate(), 150)
        finally:
            if crawl.returncode is None:
                crawl.kill()
                await crawl.wait()
        assert crawl.returncode == 0, err.decode()[-2000:]
    finally:
        rest, err_serve = await stop(proc, signal.SIGTERM)
    assert proc.returncode == 0, err_serve[-2000:]
    assert re.search(r"stopped after \d+ requests", rest)

    log = read_access_log(access_log)
    web = TestWeb(default_web(n_hosts=6, pages_per_host=3, crawl_delay=CRAWL_DELAY), port)
    pages = [r for r in log if not r.path_qs.startswith("/robots") and r.method == "GET"]
    counts = collections.Counter(web.url(r.host, r.path_qs) for r in pages)
    assert web.expected_fetches() - set(counts) == set(), "expected pages not fetched"
    assert {u: n for u, n in counts.items() if n > 1} == {}, "a page was fetched twice"
    host_delays = {h.name: max(DELAY, h.crawl_delay) for h in web.spec.of_kind("crawl_delay")}
    assert politeness_violations(log, delay=DELAY, max_in_flight=1,
                                 host_delays=host_delays) == []


async def test_python_m_courtier_testweb_serves_until_ctrl_c(tmp_path: Path) -> None:
    proc, lines = await start_serving("courtier.testweb", "--port", "0", "--hosts", "2",
                                      "--dir", str(tmp_path))
    try:
        assert (tmp_path / "seeds.txt").read_text().count("courtier.test") == 2
        assert lines[0].startswith("courtier testweb: 2 hosts on 127.0.0.1:")
    finally:
        rest, err = await stop(proc, signal.SIGINT)
    assert proc.returncode == 0, err
    assert "stopped after 0 requests" in rest


async def test_a_port_in_use_is_one_line_exit_2(tmp_path: Path) -> None:
    with contextlib.closing(socket.socket()) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "courtier", "testweb", "serve", "--port", str(port),
            "--dir", str(tmp_path), stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    lines = err.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"courtier: error: --port {port}:"), lines
