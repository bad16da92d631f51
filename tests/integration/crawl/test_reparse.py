"""`courtier reparse`: from the archive only, idempotent, interruptible, and a parser
change (through the parse seam) yields its new links and no duplicate event."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import jsonschema
import pytest

from courtier.cli.admin import run_admin
from courtier.cli.main import build_parser
from courtier.core.config import CrawlConfig
from courtier.crawl import reparse as reparse_module
from courtier.crawl.app import crawl
from courtier.crawl.intake import Intake, Scope
from courtier.crawl.reparse import Selection, default_parse, reparse, restore_scope_seeds
from courtier.events import load_schema
from courtier.parse.html import Link, ParsedPage
from courtier.store.sqlite import SqliteStore
from courtier.testweb import TestWebServer, default_web
from tests.integration.crawl.test_crawl_testweb import config_for


def with_extra_link(body: bytes, url: str, content_type: str | None,
                    x_robots_tag: str | None) -> ParsedPage:
    """A deliberate parser change: every page also links to /extra/<path>."""
    page = default_parse(body, url, content_type, x_robots_tag)
    base = url.split("/", 3)
    extra = f"{base[0]}//{base[2]}/extra/{len(base[3]) if len(base) > 3 else 0}.html"
    return dataclasses.replace(page, links=[*page.links, Link(extra, "a", "", False, "more")])


def reparse_cli(data: Path, *flags: str) -> dict[str, int]:
    out = io.StringIO()
    assert run_admin(build_parser().parse_args(["reparse", "--data", str(data), *flags]),
                     out) == 0
    report: dict[str, int] = json.loads(out.getvalue())
    return report


@pytest.mark.timeout(120)
async def test_reparse_after_a_parser_change_without_network(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    async with TestWebServer(default_web(n_hosts=2, pages_per_host=6, crawl_delay=0.2)) as server:
        await crawl(config_for(server, data), install_signals=False)  # type: ignore[arg-type]
        requests_seen = len(server.log)
    # the test web is stopped: any request would fail
    import asyncio

    first = await asyncio.to_thread(reparse_cli, data)
    assert first["captures"] > 5 and first["events"] == first["captures"]
    assert first["new_urls"] == 0  # same parser: nothing new to discover
    again = await asyncio.to_thread(reparse_cli, data, "--from-start")
    assert again["events"] == 0 and again["captures"] == first["captures"]

    store = SqliteStore(data / "courtier.db")
    await store.open()
    try:
        before = await store.read_events(0, 100_000)
        intake = Intake(Scope(CrawlConfig(), []))
        restore_scope_seeds(intake, await store.seed_urls())
        monkeypatch.setattr(reparse_module, "BATCH", 7)
        calls = 0

        def stop_after_two_batches() -> bool:
            nonlocal calls
            calls += 1
            return calls > 2

        root, checkpoint = str(data / "warc"), data / "reparse-v2.cursor"
        cut = await reparse(store, root, intake, parse=with_extra_link, parser_version=2,
                            checkpoint=checkpoint, should_stop=stop_after_two_batches)
        rest = await reparse(store, root, intake, parse=with_extra_link, parser_version=2,
                             checkpoint=checkpoint)
        assert cut.cursor < rest.cursor
        assert cut.events + rest.events == first["captures"]  # interrupted, resumed, complete
        assert cut.new_urls + rest.new_urls > 0
        repeat = await reparse(store, root, intake, parse=with_extra_link, parser_version=2,
                               from_start=True)
        assert repeat.events == 0 and repeat.new_urls == 0
        events = await store.read_events(0, 100_000)
    finally:
        await store.close()
    new = events[len(before):]
    validator = jsonschema.Draft202012Validator(load_schema())
    for event in new:
        validator.validate(event.payload)
    keys = [(e.url_key, e.version, e.payload.get("parser_version")) for e in events
            if e.payload["kind"] == "reparse"]
    assert len(keys) == len(set(keys)) == 2 * first["captures"]
    for event in new:
        links = event.payload["links"]
        if event.payload["robots"]["nofollow"]:
            assert links == []
        else:
            assert any("/extra/" in link["url"] and link["anchor"] == "more" for link in links)
    assert len(server.log) == requests_seen


def test_reparse_selection_by_time_and_host() -> None:
    payload = {"url": "http://a.test:8080/p", "fetched_at": 100.0}
    assert Selection().admits(payload)
    assert Selection(since=100.0).admits(payload) and not Selection(since=101.0).admits(payload)
    assert Selection(host="a.test").admits(payload)
    assert Selection(host="A.test:8080").admits(payload)
    assert not Selection(host="b.test").admits(payload)


def test_since_accepts_iso_and_posix_and_names_the_flag_otherwise() -> None:
    from courtier.cli.admin import parse_since
    from courtier.core.errors import ConfigError

    assert parse_since("2026-01-02T03:04:05Z") == parse_since("2026-01-02T03:04:05") == \
        1767323045.0
    assert parse_since("1767323045.5") == 1767323045.5 and parse_since(None) is None
    with pytest.raises(ConfigError, match="--since"):
        parse_since("yesterday")
