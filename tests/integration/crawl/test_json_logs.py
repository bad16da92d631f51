"""``courtier crawl --log-format json``: a real crawl's stderr, parsed line by line.

A ``courtier crawl`` process crawls the test web (a host that answers 429 with
Retry-After, hosts whose robots.txt disallows some pages or answers 500) with
``--log-format json -v``; every line it writes on stderr must be one JSON object
with the stable keys, and the fetch outcomes, robots decisions and back-offs
must be there with their fields. Checked by breaking it: with the JSON
formatter swapped for the text one in ``setup_logging`` the first ``json.loads``
fails; without the ``log_event`` call of ``finish_page`` no ``backoff`` line
appears.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import sys
from pathlib import Path

import pytest

from courtier.core.logs import KNOWN_FIELDS, STABLE_KEYS
from courtier.testweb import TestWebServer, default_web
from courtier.testweb.spec import WebSpec

RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


def web() -> WebSpec:
    spec = default_web(n_hosts=6, pages_per_host=4, crawl_delay=0.05)
    busy = dataclasses.replace(spec.hosts[0], busy_every=6, busy_status=429, retry_after="1")
    return dataclasses.replace(spec, hosts=[busy, *spec.hosts[1:]])


async def crawl_stderr(server: TestWebServer, data: Path) -> tuple[int, str]:
    hosts = data.parent / "hosts.txt"
    hosts.write_text(server.web.hosts_file_text())
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "courtier", "crawl", *server.web.seeds(), "--data", str(data),
        "--resolve", str(hosts), "--allow-network", "127.0.0.0/8", "--delay", "0.05",
        "--linger", "0", "--progress", "log", "--log-format", "json", "-v",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "COURTIER_SYSTEM_DNS": "off"})
    _, err = await proc.communicate()
    return proc.returncode or 0, err.decode()


@pytest.mark.timeout(180)
async def test_a_crawls_json_log_is_one_object_per_line_with_stable_keys(
        tmp_path: Path) -> None:
    async with TestWebServer(web()) as server:
        code, err = await crawl_stderr(server, tmp_path / "data")
    assert code == 0, err[-2000:]
    lines = err.splitlines()
    assert len(lines) > 20
    records = []
    for number, line in enumerate(lines, 1):
        record = json.loads(line)  # every line, not only ours
        assert isinstance(record, dict), f"line {number}: {line!r}"
        assert all(key in record for key in STABLE_KEYS), f"line {number}: {line!r}"
        assert RFC3339_UTC.match(record["time"]), record["time"]
        assert record["level"] in ("debug", "info", "warning", "error", "critical")
        assert SNAKE.match(record["event"]), record["event"]
        records.append(record)
    by_event: dict[str, list[dict[str, object]]] = {}
    for record in records:
        by_event.setdefault(str(record["event"]), []).append(record)
    fetches = by_event["fetch"]
    assert {"ok"} <= {f["outcome"] for f in fetches}
    assert all(set(KNOWN_FIELDS[:3]) <= set(f) for f in fetches)  # host, url, shard
    assert all(str(f["url"]).startswith(f"{f['host']}/") for f in fetches)  # host key
    denied = by_event["robots_denied"]  # disallow_some
    assert denied and all(d["outcome"] == "robots_denied" and d["host"] for d in denied)
    robots = by_event["robots_txt"]
    decisions = {r["outcome"] for r in robots}
    assert "ok" in decisions and len(decisions) >= 2  # the 500 host: unreachable
    assert all(str(r["url"]).endswith(".txt") for r in robots)
    backoffs = by_event["backoff"]
    busy = web().hosts[0].name
    assert any(busy in str(b["host"]) and b["status"] == 429 and b["reason"] == "status 429"
               and b["retry_after"] is True for b in backoffs)
    assert by_event["progress"]  # the progress display's lines are JSON too
