"""A crawl prepared with ``seed add`` / ``policy set`` on a new ``--data`` before it runs,
and ``--api`` given as HOST:PORT or as a URL to both sides (issue #36).

Seen red on scratch edits (restored): ``must_exist=True`` again for ``seed add``, and
``api_base_url`` returning the text as given (the HOST:PORT form then fails)."""

from __future__ import annotations

import asyncio
import collections
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


def _cli(runner: object, *argv: str) -> tuple[int, dict[str, object]]:
    out = io.StringIO()
    code = runner(build_parser().parse_args(list(argv)), out)  # type: ignore[operator]
    return code, json.loads(out.getvalue())


@pytest.mark.timeout(120)
async def test_seeds_added_to_a_new_folder_are_crawled_by_crawl_data(tmp_path: Path) -> None:
    data = tmp_path / "new-crawl"
    async with TestWebServer(default_web(n_hosts=2, pages_per_host=4, crawl_delay=0.2)) as server:
        seeds = server.web.seeds()
        code, added = await asyncio.to_thread(_cli, run_query, "seed", "add", "--json", *seeds,
                                              "--data", str(data))
        assert code == 0 and added["accepted"] == len(seeds)
        first_host = seeds[0].split("/")[2]
        code, policy = await asyncio.to_thread(_cli, run_admin, "policy", "set", first_host,
                                               "--delay", "0.3", "--data", str(data))
        assert code == 0 and policy["policy"]["delay"] == 0.3  # type: ignore[index]
        # `courtier crawl --data new-crawl` with no seeds of its own: the stored ones
        status = await crawl(config_for(server, data, seeds=()),  # type: ignore[arg-type]
                             install_signals=False)
        expected = server.web.expected_fetches()
        log = list(server.log)
    assert status.stop_reason == "nothing due"
    gets = [r for r in log if r.method == "GET" and not r.path_qs.startswith("/robots")]
    counts = collections.Counter(server.url(r.host, r.path_qs) for r in gets)
    assert set(counts) == expected
    assert [u for u, n in counts.items() if n > 1] == []


@pytest.mark.timeout(120)
async def test_api_as_host_port_or_url_on_both_sides(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with TestWebServer(default_web(n_hosts=1, pages_per_host=30, crawl_delay=0.2)) as server:
        urls: list[str] = []
        stop = asyncio.Event()
        # the serving side given the URL form, the query side the HOST:PORT form
        config = config_for(server, data, api="http://127.0.0.1:0")
        task = asyncio.create_task(crawl(config, install_signals=False,  # type: ignore[arg-type]
                                         announce=urls.append, stop=stop))
        try:
            for _ in range(200):  # bounded: 10 s
                if urls:
                    break
                await asyncio.sleep(0.05)
            host_port = urls[0].removeprefix("http://").rstrip("/")
            for form in (host_port, urls[0]):
                code, stats = await asyncio.to_thread(_cli, run_query, "stats", "--api", form)
                assert code == 0 and stats["running"] is True, form
        finally:
            stop.set()
            await task
