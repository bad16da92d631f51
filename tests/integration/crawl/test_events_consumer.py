"""``courtier events --consumer NAME`` follows the outbox with a cursor registered in the
store: a second run prints only the events added since, and the registered position is
the id of the last event printed. Checked by breaking it: with the advance after each
page removed (cli/admin.py, ``_consumer_events``), the second run printed every event
again and the position stayed 0.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from courtier.cli.main import main
from courtier.store.sqlite import SqliteStore
from tests.integration.crawl.test_events_drain import fill_outbox, numbers, run


async def position(db: Path, name: str) -> int | None:
    store = SqliteStore(db)
    await store.open()
    try:
        return await store.consumer_position(name)
    finally:
        await store.close()


@pytest.mark.timeout(120)
def test_a_registered_consumer_reads_only_what_is_new(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = data / "courtier.db"
    asyncio.run(fill_outbox(db, 30))
    code, first, err = run(capsys, "--data", str(data), "--consumer", "a", "--limit", "12")
    assert (code, err) == (0, "")
    assert numbers(first) == list(range(12))
    assert asyncio.run(position(db, "a")) == first[-1]["id"]
    code, second, _ = run(capsys, "--data", str(data), "--consumer", "a")
    assert code == 0 and numbers(second) == list(range(12, 30))  # only the rest
    assert asyncio.run(position(db, "a")) == second[-1]["id"]
    code, caught_up, _ = run(capsys, "--data", str(data), "--consumer", "a")
    assert code == 0 and caught_up == []
    asyncio.run(fill_outbox(db, 5, host="http://later.test:8080"))  # the crawl went on
    code, later, _ = run(capsys, "--data", str(data), "--consumer", "a")
    assert code == 0 and numbers(later) == list(range(5))
    assert [e["payload"]["url"] for e in later] == [  # type: ignore[index]
        f"http://later.test:8080/page/{n}" for n in range(5)]
    assert asyncio.run(position(db, "a")) == later[-1]["id"]
    # another name has its own cursor, from the start
    code, other, _ = run(capsys, "--data", str(data), "--consumer", "b", "--limit", "3")
    assert code == 0 and numbers(other) == list(range(3))
    assert asyncio.run(position(db, "a")) == later[-1]["id"]


@pytest.mark.parametrize("extra", [["--api", "127.0.0.1:9"], ["--after", "3"], ["--follow"]])
def test_a_registered_consumer_refuses_a_second_cursor(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    code = main(["events", "--data", str(tmp_path), "--consumer", "a", *extra])
    err = capsys.readouterr().err
    assert code == 2 and "--consumer: give it without" in err
