"""``courtier crawl`` stopped by SIGTERM (a service manager, ``kill``), as a user runs it:
the summary says "stopped", not "interrupted" (that is Ctrl-C's word), and the stopping
line is an INFO line, not a WARNING (issue #36).

Seen red on a scratch edit (restored since): with every signal's reason "interrupted",
and with the stopping line logged at WARNING.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from courtier.testweb import RequestRecord, TestWebServer, default_web

pytestmark = pytest.mark.timeout(120)


async def test_sigterm_is_reported_as_stopped_in_an_info_line(tmp_path: Path) -> None:
    spec = default_web(n_hosts=4, pages_per_host=20, crawl_delay=0.3)
    tenth_request = asyncio.Event()
    requests: list[RequestRecord] = []

    def seen(record: RequestRecord) -> None:
        requests.append(record)
        if len(requests) >= 10:
            tenth_request.set()

    async with TestWebServer(spec, on_request=seen) as server:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text(server.web.hosts_file_text())
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "courtier", "crawl", "--data", str(tmp_path / "data"),
            "--resolve", str(hosts), "--allow-network", "127.0.0.0/8", "--delay", "0.1",
            "--progress", "none", "--linger", "0", *server.web.seeds(),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            await asyncio.wait_for(tenth_request.wait(), 60)  # a hang guard
            proc.send_signal(signal.SIGTERM)
            out, err = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    lines = err.decode().splitlines()
    assert proc.returncode == 0, lines
    assert out.decode().startswith("courtier: stopped after"), out
    [stopping] = [line for line in lines if "stopping" in line]
    assert " INFO courtier.notice: stopping (SIGTERM): finishing in-flight fetches" in stopping
    assert not [line for line in lines if " WARNING " in line or " ERROR " in line], lines
