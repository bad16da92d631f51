"""``seed add`` / ``policy set`` with ``--data`` run the API operation in-process:
no listening socket is opened (a token-less server on loopback, even for one call,
is an open door for every local process and web page)."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest

from courtier.cli import build_parser
from courtier.cli_admin import run_admin
from courtier.cli_query import run_query
from courtier.store.sqlite import SqliteStore
from courtier.urls import canonicalize


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
    code, answer = _run(run_query, "seed", "add", "http://a.test/", "http://a.test/b",
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
