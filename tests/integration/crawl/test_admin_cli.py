"""policy / events / export against a crawl's store, including while it runs."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from courtier.cli.admin import domain_of, run_admin
from courtier.cli.main import main
from courtier.crawl.app import crawl
from courtier.testweb import TestWebServer, default_web
from tests.integration.crawl.test_crawl_testweb import config_for


def admin(*argv: str) -> list[dict[str, object]]:
    from courtier.cli.main import build_parser

    out = io.StringIO()
    assert run_admin(build_parser().parse_args(list(argv)), out) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_domain_of_host_names_and_urls() -> None:
    assert domain_of("Example.COM") == "example.com"
    assert domain_of("https://a.test:8443/x") == "a.test:8443"
    assert domain_of("a.test:8080") == "a.test:8080"


def test_admin_commands_need_an_existing_crawl(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["events", "--data", str(tmp_path)]) == 2
    assert "no crawl database" in capsys.readouterr().err


@pytest.mark.timeout(120)
async def test_events_and_audit_export_after_a_crawl(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with TestWebServer(default_web(n_hosts=3, pages_per_host=4, crawl_delay=0.2)) as server:
        await crawl(config_for(server, data), install_signals=False)  # type: ignore[arg-type]
    events = await asyncio.to_thread(admin, "events", "--data", str(data))
    assert events and [e["id"] for e in events] == sorted(e["id"] for e in events)
    keys = [(e["url_key"], e["version"]) for e in events]
    assert len(keys) == len(set(keys))  # one event per (url, version)
    again = await asyncio.to_thread(admin, "events", "--data", str(data), "--after",
                                    str(events[2]["id"]))
    assert again == events[3:]  # re-reading from a cursor gives the same events
    audit = await asyncio.to_thread(admin, "export", "audit", "--data", str(data))
    assert len(audit) == len(events)
    fetched = [row for row in audit if row["outcome"] == "ok"]
    assert fetched and all(row["robots_digest"] for row in fetched)
    assert all(row["delay_applied"] >= 0.15 for row in fetched)


@pytest.mark.timeout(120)
async def test_policy_block_applies_to_a_running_crawl_within_seconds(tmp_path: Path) -> None:
    data = tmp_path / "data"
    # one host, the one blocked: the crawl ends once its queue is refused (a second host
    # only kept the crawl going for its own 40 pages, which nothing judged)
    async with TestWebServer(default_web(n_hosts=1, pages_per_host=40, crawl_delay=0.2)) as server:
        target = server.web.seeds()[0].split("//")[1].split("/")[0]  # host:port
        task = asyncio.create_task(crawl(config_for(server, data), install_signals=False))  # type: ignore[arg-type]
        for _ in range(400):  # bounded: at most 20 s
            if [r for r in server.log if r.host == target.split(":")[0]
                    and r.path_qs != "/robots.txt"]:
                break
            await asyncio.sleep(0.05)
        rows = await asyncio.to_thread(admin, "policy", "set", target, "--block",
                                       "--data", str(data))
        assert rows[0]["policy"]["blocked"] is True  # type: ignore[index]
        name = target.split(":")[0]
        before = len([r for r in server.log if r.host == name])
        status = await task
        expected = {u for u in server.web.expected_fetches() if f"//{target}/" in u}
        after = [r for r in server.log if r.host == name][before:]
    # causal, not timed: the block stopped that host's crawl short of its end (a loaded
    # machine only means fewer requests before the worker's next policy poll), and the
    # rest of its queue was refused, not fetched
    assert before + len(after) < len(expected)
    assert status.denied > 0
    cleared = await asyncio.to_thread(admin, "policy", "clear", f"http://{target}",
                                      "--data", str(data))
    assert cleared[0]["policy"]["blocked"] is False  # type: ignore[index]


@pytest.mark.timeout(120)
async def test_events_cursor_file_resumes_across_restarts_of_both_sides(tmp_path: Path) -> None:
    data, cursor = tmp_path / "data", tmp_path / "consumer.cursor"
    async with TestWebServer(default_web(n_hosts=2, pages_per_host=6, crawl_delay=0.2)) as server:
        await crawl(config_for(server, data, max_pages=4), install_signals=False)  # type: ignore[arg-type]
        first = await asyncio.to_thread(admin, "events", "--data", str(data),
                                        "--cursor-file", str(cursor), "--limit", "3")
        assert first and cursor.read_text().strip() == str(first[-1]["id"])
        # the crawl restarts (resumes) and adds events; the consumer restarts from its file
        await crawl(config_for(server, data), install_signals=False)  # type: ignore[arg-type]
    rest: list[dict[str, object]] = []
    while batch := await asyncio.to_thread(admin, "events", "--data", str(data),
                                           "--cursor-file", str(cursor), "--limit", "3"):
        rest += batch
    everything = await asyncio.to_thread(admin, "events", "--data", str(data))
    assert first + rest == everything  # no event lost, none twice
    assert len(everything) > len(first)


def test_events_follow_outlives_an_api_that_is_down(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cursor = tmp_path / "c"
    cursor.write_text("41\n")
    out = io.StringIO()
    from courtier.cli.main import build_parser

    args = build_parser().parse_args(["events", "--api", f"http://127.0.0.1:{port}", "--follow",
                                      "--max-seconds", "0.3", "--cursor-file", str(cursor)])
    assert run_admin(args, out) == 0  # kept trying, then stopped at --max-seconds
    assert out.getvalue() == "" and cursor.read_text() == "41\n"
    cursor.write_text("not a number")
    assert main(["events", "--data", str(tmp_path), "--cursor-file", str(cursor)]) == 2
    assert "--cursor-file" in capsys.readouterr().err
