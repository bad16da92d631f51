"""``seed add`` / ``policy set`` with ``--data`` run the API operation in-process:
no listening socket is opened (a token-less server on loopback, even for one call,
is an open door for every local process and web page)."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from courtier.cli.admin import run_admin
from courtier.cli.main import build_parser
from courtier.cli.query import run_query
from courtier.core.outcome import Outcome
from courtier.core.urls import canonicalize
from courtier.store.base import FetchCommit, NewUrl
from courtier.store.sqlite import SqliteStore


def _no_listening(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []

    async def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append("create_server")
        raise AssertionError("a CLI call over --data opened a listening socket")

    monkeypatch.setattr(asyncio.BaseEventLoop, "create_server", refuse)
    return opened


def _run(runner: Any, *argv: str) -> tuple[int, Any]:
    out = io.StringIO()
    code = runner(build_parser().parse_args(list(argv)), out)
    return code, json.loads(out.getvalue())


async def _empty_crawl(data: Path) -> None:
    store = SqliteStore(data / "courtier.db")
    await store.open()
    await store.close()


def test_seed_add_and_policy_set_open_no_socket(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    asyncio.run(_empty_crawl(data))
    opened = _no_listening(monkeypatch)
    code, answer = _run(run_query, "seed", "add", "--json", "http://a.test/", "http://a.test/b",
                        "--priority", "42", "--data", str(data))
    assert code == 0 and answer["accepted"] == 2, answer
    code, policy = _run(run_admin, "policy", "set", "a.test", "--delay", "3", "--data", str(data))
    assert code == 0 and policy["policy"]["delay"] == 3.0
    code, bad = _run(run_admin, "policy", "set", "a.test", "--max-pages-per-day", str(2**64),
                     "--data", str(data))
    assert code == 1 and "max_pages" in bad["error"]
    code, missing = _run(run_query, "url", "http://a.test/zzz", "--data", str(data))
    assert code == 1 and "unknown" in missing["error"]
    assert opened == []

    async def priority() -> Any:
        store = SqliteStore(data / "courtier.db")
        await store.open()
        try:
            return await store.get_url(canonicalize("http://a.test/b").url_key)
        finally:
            await store.close()

    row = asyncio.run(priority())
    assert row is not None and row["priority"] == 42


async def _fetched_crawl(data: Path) -> None:
    store = SqliteStore(data / "courtier.db")
    await store.open()
    try:
        rows = []
        for raw in ("http://a.test/", "http://a.test/gone"):
            url = canonicalize(raw)
            rows.append(NewUrl(url.url_key, url.url, url.host_key, url.shard, 0, 10, 1.0, 1.0))
        await store.add_urls(rows)
        leases = await store.load_due(sorted({r.shard for r in rows}), 2.0, 10, 10)
        await store.commit([
            FetchCommit(d.url_key, d.url, d.host_key, d.shard, d.version, 0,
                        Outcome.OK if d.url.endswith("/") else Outcome.GONE, 3.0, 100.0,
                        status=200 if d.url.endswith("/") else 404,
                        event={"status": 200 if d.url.endswith("/") else 404})
            for d in leases])
    finally:
        await store.close()


async def _api_stats(data: Path) -> tuple[int, Any]:
    from courtier.api.control import StoreOnlyControl
    from courtier.api.routes import invoke

    store = SqliteStore(data / "courtier.db")
    await store.open()
    try:
        return await invoke(StoreOnlyControl(store), "GET", "/v1/stats")
    finally:
        await store.close()


def test_stats_over_data_answers_as_the_api_without_loading_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    asyncio.run(_fetched_crawl(data))
    code, answer = _run(run_query, "stats", "--data", str(data))
    status, api = asyncio.run(_api_stats(data))
    assert (code, status) == (0, 200)
    assert {k: v for k, v in answer.items() if k != "time"} == \
        {k: v for k, v in api.items() if k != "time"}
    assert answer["events_seen"] == 2 and answer["status_mix"] == {"2xx": 1, "4xx": 1}
    assert answer["outcomes"] == {"ok": 1, "gone": 1} and answer["store"]["urls"] == 2
    probe = ("import sys; from courtier.cli.main import main;"
             " main(['stats', '--data', sys.argv[1]]);"
             " print(sorted(m for m in sys.modules if m.startswith(('courtier.api.views',"
             " 'courtier.api.control', 'courtier.api.routes', 'aiohttp'))), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe, str(data)], capture_output=True,
                          text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["events_seen"] == 2
    assert done.stderr.strip().splitlines()[-1] == "[]"
