"""The low-speed limit in a crawl from the command line: a body that arrives slowly but
steadily is kept whole, a drip is still cut.

``courtier crawl --low-speed-limit 10000 --low-speed-time 1`` (a subprocess) fetches
two seeds of a local server, on two hosts: ``/steady`` sends 120,000 bytes at
40,000 B/s (about 3 s, four times the limit; the server paces by its clock, catching
up after any pause of its own, so a busy machine delays the bytes without making the
body slower on average) and ``/drip`` sends 4 bytes a second. Judged from the crawl's
WARC files: ``/steady`` has a response record of the whole body and no
``WARC-Truncated``; ``/drip`` has one with ``WARC-Truncated: time`` and only the bytes
that came before the cut.

Seen red on a scratch copy: with ``_SpeedCheck`` holding ten times the limit (a check
that cuts steady bodies) the /steady record was truncated ("(40405, 'time')"); with the
check off (limit 0) the drip never ended and the test timed out.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path

import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from tests.integration.serve import serve

STEADY_BYTES = 120_000
STEADY_RATE = 40_000   # B/s, four times the limit
LIMIT = 10_000         # --low-speed-limit (B/s)


async def handle(request: web.Request) -> web.StreamResponse:
    if request.path not in ("/steady", "/drip"):
        return web.Response(status=404)
    response = web.StreamResponse(headers={"Content-Type": "text/plain",
                                           "Content-Length": str(STEADY_BYTES)})
    await response.prepare(request)
    began, sent = time.monotonic(), 0
    with contextlib.suppress(ConnectionError):
        if request.path == "/steady":
            while sent < STEADY_BYTES:
                due = min(STEADY_BYTES, int(STEADY_RATE * (time.monotonic() - began)) + 2000)
                if due > sent:
                    await response.write(b"s" * (due - sent))
                    sent = due
                await asyncio.sleep(0.05)
        else:
            for _ in range(2400):  # 4 B/s, for at most 10 minutes
                await response.write(b"d")
                await asyncio.sleep(0.25)
    return response


def warc_responses(root: Path) -> dict[str, tuple[int, str | None]]:
    """Path → (payload bytes, WARC-Truncated) of every response record under ``root``."""
    found = {}
    for path in sorted(root.rglob("*.warc.gz")):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type == "response":
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    size = len(record.content_stream().read())
                    found[uri.split("/", 3)[3]] = (
                        size, record.rec_headers.get_header("WARC-Truncated"))
    return found


@pytest.mark.timeout(180)
async def test_a_steady_slow_body_is_kept_whole_and_a_drip_is_cut(tmp_path: Path) -> None:
    async with serve(handle) as port:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text("127.0.0.1 steady.test drip.test\n")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "courtier", "crawl", "--data", str(tmp_path / "data"),
            "--resolve", str(hosts), "--allow-network", "127.0.0.0/8", "--delay", "0",
            "--progress", "none", "--linger", "0", "--low-speed-limit", str(LIMIT),
            "--low-speed-time", "1", "--accept-type", "text/plain",  # plain bodies are kept
            f"http://steady.test:{port}/steady",
            f"http://drip.test:{port}/drip",  # two hosts: the cut drip's back-off is its own
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            _, err = await proc.communicate()
        finally:  # a failed or timed-out test leaves no crawler behind
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    records = warc_responses(tmp_path / "data" / "warc")
    assert records["steady"] == (STEADY_BYTES, None), records
    size, truncated = records["drip"]
    assert truncated == "time", records
    assert 0 < size < 100, records
