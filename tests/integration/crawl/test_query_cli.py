"""seed add / url / domain stats / stats, from the store and from a running crawl's API."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from courtier.cli.admin import run_admin
from courtier.cli.main import build_parser
from courtier.cli.query import run_query
from courtier.crawl.app import crawl
from courtier.testweb import TestWebServer, default_web
from tests.integration.crawl.test_crawl_testweb import config_for


def admin(*argv: str) -> tuple[int, dict[str, object]]:
    out = io.StringIO()
    code = run_admin(build_parser().parse_args(list(argv)), out)
    return code, json.loads(out.getvalue())


def admin_lines(*argv: str) -> tuple[int, list[dict[str, object]]]:
    out = io.StringIO()
    code = run_admin(build_parser().parse_args(list(argv)), out)
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


def query(*argv: str) -> tuple[int, dict[str, object]]:
    out = io.StringIO()
    code = run_query(build_parser().parse_args(list(argv)), out)
    return code, json.loads(out.getvalue())


@pytest.mark.timeout(120)
async def test_same_answers_from_the_store_and_from_the_api(tmp_path: Path) -> None:
    data = tmp_path / "data"
    spec = default_web(n_hosts=2, pages_per_host=8, crawl_delay=0.2)
    async with TestWebServer(spec) as server:
        urls: list[str] = []
        config = config_for(server, data, api="127.0.0.1:0")
        stop = asyncio.Event()  # the rest of the crawl (at the 0.5 s delay set below) is not judged
        task = asyncio.create_task(crawl(config, install_signals=False,  # type: ignore[arg-type]
                                         announce=urls.append, stop=stop))
        for _ in range(200):  # bounded: 10 s
            if urls and len(server.log) > 5:
                break
            await asyncio.sleep(0.05)
        seed = server.web.seeds()[0]
        code, live = await asyncio.to_thread(query, "url", seed, "--api", urls[0])
        row = live["url"]
        assert code == 0 and row["url"] == seed and row["version"] >= 1  # type: ignore[index]
        code, policy = await asyncio.to_thread(admin, "policy", "set", seed.split("/")[2],
                                               "--delay", "0.5", "--api", urls[0])
        assert code == 0 and policy["policy"]["delay"] == 0.5  # type: ignore[index]
        assert policy["applied_live"]  # the running scheduler has it now
        code, events = await asyncio.to_thread(admin_lines, "events", "--api", urls[0])
        assert code == 0 and events and all("url_key" in e for e in events)
        code, live_stats = await asyncio.to_thread(query, "stats", "--api", urls[0])
        assert code == 0 and live_stats["running"] is True
        assert live_stats["status"]["fetched"] >= 1  # type: ignore[index]
        stop.set()
        await task
    code, stored = await asyncio.to_thread(query, "url", seed, "--data", str(data))
    assert code == 0 and stored["url"]["url_key"] == row["url_key"]  # type: ignore[index]
    assert stored["url"]["status"] == row["status"] == 200  # type: ignore[index]
    assert stored["history"] and stored["robots"]["decision"] == "allowed"  # type: ignore[index]
    host = seed.split("/")[2]
    code, domain = await asyncio.to_thread(query, "domain", "stats", host, "--data", str(data))
    assert code == 0 and domain["hosts"][0]["stored"]["fetched"] > 0  # type: ignore[index]
    code, added = await asyncio.to_thread(
        query, "seed", "add", "--json", "http://new.example/", "not a url", seed,
        "--data", str(data))
    results = [r["result"] for r in added["results"]]  # type: ignore[index,union-attr]
    assert results == ["accepted", "rejected", "duplicate"]
    code, missing = await asyncio.to_thread(query, "url", "http://nowhere.example/x",
                                            "--data", str(data))
    assert code == 1 and "error" in missing
