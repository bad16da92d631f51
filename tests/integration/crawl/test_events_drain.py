"""``courtier events`` drains the outbox past one page, through the store and the API.

An outbox of 2,345 events (more than two pages of the API's 1,000) is written
through the store API; the command must print every one of them, in id order,
as pure JSON lines, and exit 0, whether it reads the store (``--data``) or a
running admin API (``--api``). Checked by breaking it: with the drain stopping
after its first page (``return`` after the first ``yield`` in events/drain.py),
the exact-count assertions fail with 1000 != 2345.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from courtier.api.control import StoreOnlyControl
from courtier.api.server import make_app, start_api
from courtier.cli.main import main
from courtier.core.outcome import Outcome
from courtier.core.urls import canonicalize
from courtier.store.base import FetchCommit, NewUrl
from courtier.store.sqlite import SqliteStore

EVENTS = 2_345
HOST = "http://drain.test:8080"


async def fill_outbox(db: Path, count: int, host: str = HOST) -> None:
    """``count`` fetch events of ``host``, event ``n`` carrying ``"n": n`` in commit order."""
    store = SqliteStore(db)
    await store.open()
    try:
        rows = []
        for n in range(count):
            url = canonicalize(f"{host}/page/{n}")
            rows.append(NewUrl(url.url_key, url.url, url.host_key, url.shard, 0, 0, 1.0, 1.0))
        await store.add_urls(rows)
        shards = sorted({r.shard for r in rows})
        epochs = await store.acquire_shards("filler", shards, 1.0, 600.0)
        due = await store.load_due(shards, 2.0, count, count)
        order = {r.url_key: n for n, r in enumerate(rows)}
        due.sort(key=lambda d: order[d.url_key])
        assert len(due) == count
        for start in range(0, count, 500):
            await store.commit([
                FetchCommit(d.url_key, d.url, d.host_key, d.shard, d.version, epochs[d.shard],
                            Outcome.OK, 3.0, 1e9, status=200,
                            event={"url": d.url, "status": 200, "outcome": "ok",
                                   "n": order[d.url_key]})
                for d in due[start:start + 500]])
    finally:
        await store.close()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    asyncio.run(fill_outbox(folder / "courtier.db", EVENTS))
    return folder


@pytest.fixture
def api(data: Path) -> Iterator[str]:
    """A store-only admin API over ``data``, served on loopback from its own thread."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, object] = {}

    async def serve() -> None:
        store = SqliteStore(data / "courtier.db")
        await store.open()
        runner, port = await start_api(make_app(StoreOnlyControl(store), None, None))
        box["port"], box["stop"] = port, asyncio.Event()
        started.set()
        await box["stop"].wait()  # type: ignore[attr-defined]
        await runner.cleanup()
        await store.close()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),))
    thread.start()
    assert started.wait(30)
    try:
        yield f"http://127.0.0.1:{box['port']}"
    finally:
        loop.call_soon_threadsafe(box["stop"].set)  # type: ignore[attr-defined]
        thread.join(30)
        loop.close()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, object]],
                                                                  str]:
    """Exit code, stdout parsed line by line (each line must be one JSON object), stderr."""
    code = main(["events", *argv])
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    parsed = [json.loads(line) for line in lines]
    assert all(isinstance(p, dict) for p in parsed)
    return code, parsed, captured.err


def numbers(events: list[dict[str, object]]) -> list[object]:
    return [e["payload"]["n"] for e in events]  # type: ignore[index]


@pytest.mark.timeout(120)
def test_events_from_the_store_print_every_event_past_one_page(
        data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, events, err = run(capsys, "--data", str(data), "--after", "0")
    assert (code, err) == (0, "")
    assert len(events) == EVENTS
    assert numbers(events) == list(range(EVENTS))  # commit order, nothing twice
    ids = [e["id"] for e in events]
    assert ids == sorted(set(ids))  # type: ignore[type-var]
    # --limit caps the total explicitly, any positive N, also past one page
    code, capped, _ = run(capsys, "--data", str(data), "--limit", "1500")
    assert code == 0 and numbers(capped) == list(range(1500))
    code, big, _ = run(capsys, "--data", str(data), "--limit", "100000")
    assert code == 0 and len(big) == EVENTS
    # from a cursor: exactly the rest
    code, rest, _ = run(capsys, "--data", str(data), "--after", str(ids[1233]))
    assert code == 0 and numbers(rest) == list(range(1234, EVENTS))


@pytest.mark.timeout(120)
def test_events_from_the_api_print_every_event_past_one_page(
        api: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cursor = tmp_path / "consumer.cursor"
    code, events, err = run(capsys, "--api", api, "--after", "0", "--cursor-file", str(cursor))
    assert (code, err) == (0, "")
    assert numbers(events) == list(range(EVENTS))
    assert cursor.read_text().strip() == str(events[-1]["id"])
    code, again, _ = run(capsys, "--api", api, "--cursor-file", str(cursor))
    assert code == 0 and again == []  # caught up: nothing printed, still exit 0
    code, capped, _ = run(capsys, "--api", api, "--after", "0", "--limit", "2001")
    assert code == 0 and numbers(capped) == list(range(2001))


@pytest.mark.timeout(120)
def test_events_errors_go_to_stderr_not_into_the_stream(
        api: str, data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, events, err = run(capsys, "--api", api, "--after", "-5")
    assert code == 1 and events == []  # the API's 400 answer is not printed as an event
    assert "after must be" in err and "answered 400" in err
    code, events, err = run(capsys, "--data", str(data), "--limit", "0")
    assert code == 2 and events == [] and "--limit 0" in err
    code, events, err = run(capsys, "--data", str(data), "--after", "-1")
    assert code == 1 and events == [] and "after must be" in err


def test_follow_stops_at_limit(data: Path) -> None:
    """``--follow --limit N`` ends once N events were printed, without waiting for more."""
    from courtier.cli.admin import run_admin
    from courtier.cli.main import build_parser

    out = io.StringIO()
    args = build_parser().parse_args(["events", "--data", str(data), "--follow",
                                      "--limit", "1200"])
    assert run_admin(args, out) == 0
    printed = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [p["payload"]["n"] for p in printed] == list(range(1200))
