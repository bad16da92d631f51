"""``courtier worker``: a service that starts empty, takes seeds over its API, and stops on
SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest

from courtier.testweb import TestWebServer, default_web


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.timeout(120)
async def test_worker_takes_seeds_over_the_api_and_stops_cleanly(tmp_path: Path) -> None:
    async with TestWebServer(default_web(n_hosts=2, pages_per_host=3, crawl_delay=0.2)) as web:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text(web.web.hosts_file_text())
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "courtier", "worker", "--data", str(tmp_path / "data"),
            "--api", f"127.0.0.1:{port}", "--resolve", str(hosts),
            "--allow-network", "127.0.0.0/8", "--delay", "0.1", "--progress", "none",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            base = f"http://127.0.0.1:{port}"
            async with aiohttp.ClientSession() as session:
                for _ in range(200):  # bounded: the API comes up within 10 s
                    try:
                        async with session.get(base + "/healthz") as resp:
                            if resp.status == 200:
                                break
                    except aiohttp.ClientError:
                        pass
                    await asyncio.sleep(0.05)
                seeds = {"urls": web.web.seeds(), "extend_scope": True}
                async with session.post(base + "/v1/seeds", json=seeds) as resp:
                    assert resp.status == 200
                    assert (await resp.json())["accepted"] == 2
                expected = web.web.expected_fetches()
                for _ in range(400):  # bounded: 20 s
                    if expected <= web.fetched_urls():
                        break
                    await asyncio.sleep(0.05)
                assert expected <= web.fetched_urls()
            assert proc.returncode is None  # a service does not end when idle
            proc.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(proc.communicate(), 30)
            assert proc.returncode == 0, err.decode()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
