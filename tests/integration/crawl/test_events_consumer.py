"""``courtier events --consumer NAME`` follows the outbox with a cursor registered in the
store: a second run prints only the events added since, and the registered position is
the id of the last event printed. Checked by breaking it: with the advance after each
page removed (cli/admin.py, ``_consumer_events``), the second run printed every event
again and the position stayed 0.
"""

from __future__ import annotations

import asyncio
import time
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


async def prune_everything_read(db: Path) -> int:
    """Remove every event the registered consumers have read (a cut in the future: every
    event is old enough); the highest position removed."""
    store = SqliteStore(db)
    await store.open()
    try:
        await store.prune_events(time.time() + 3600, 1000)
        return await store.events_pruned_through()
    finally:
        await store.close()


@pytest.mark.timeout(120)
def test_pruning_keeps_what_a_consumer_has_not_read_and_tells_other_readers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A registered consumer restarted after a prune resumes exactly after its position
    (the events it had not read were kept); a reader without a registered cursor whose
    position was pruned is refused with the oldest readable position and what to do, and
    gets exactly the rest from there. Seen red: with ``check_readable`` removed from the
    SQLite store, ``courtier events --after 3`` exited 0 (``assert (0 == 1)``): it read on
    past the removed events 3-11 without a word."""
    data = tmp_path / "data"
    data.mkdir()
    db = data / "courtier.db"
    asyncio.run(fill_outbox(db, 30))
    code, first, _ = run(capsys, "--data", str(data), "--consumer", "a", "--limit", "12")
    assert code == 0 and numbers(first) == list(range(12))
    through = asyncio.run(prune_everything_read(db))
    assert through == first[-1]["id"]  # not one event past the consumer's position
    code, rest, _ = run(capsys, "--data", str(data), "--consumer", "a")
    assert code == 0 and numbers(rest) == list(range(12, 30))  # resumes exactly
    code, out, err = run(capsys, "--data", str(data), "--after", "3")
    assert code == 1 and out == []
    assert "events after position 3 were pruned" in err
    assert f"oldest position still readable is {through + 1}" in err
    assert f"--after {through}" in err and "--consumer NAME" in err
    code, tail, _ = run(capsys, "--data", str(data), "--after", str(through))
    assert code == 0 and numbers(tail) == list(range(12, 30))
    # a consumer registered after the prune starts at the oldest readable position
    code, newcomer, _ = run(capsys, "--data", str(data), "--consumer", "b")
    assert code == 0 and numbers(newcomer) == list(range(12, 30))


@pytest.mark.timeout(120)
def test_consumers_are_listed_and_a_forgotten_one_stops_holding_the_outbox(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``events --consumers`` lists positions and what was pruned; ``--forget-consumer``
    unregisters one, after which the retention removes what only it held. Seen red: with
    the forget answering True without deleting (SqliteStore.forget_consumer), the
    answer still listed "stale" among the consumers."""
    data = tmp_path / "data"
    data.mkdir()
    db = data / "courtier.db"
    asyncio.run(fill_outbox(db, 10))
    assert run(capsys, "--data", str(data), "--consumer", "stale", "--limit", "2")[0] == 0
    assert run(capsys, "--data", str(data), "--consumer", "live")[0] == 0
    code, [listed], _ = run(capsys, "--data", str(data), "--consumers")
    assert code == 0 and listed == {"consumers": {"live": 10, "stale": 2},
                                    "pruned_through": 0, "shard_consumers": {}}
    assert asyncio.run(prune_everything_read(db)) == 2  # "stale" holds the rest
    code, [answer], _ = run(capsys, "--data", str(data), "--forget-consumer", "stale")
    assert code == 0 and answer == {"consumers": {"live": 10}, "forgotten": True,
                                    "pruned_through": 2, "shard_consumers": {}}
    assert asyncio.run(prune_everything_read(db)) == 10
    code, [again], _ = run(capsys, "--data", str(data), "--forget-consumer", "stale")
    assert code == 1 and again["forgotten"] is False


@pytest.mark.timeout(120)
def test_a_per_shard_consumer_reads_by_shard_and_holds_what_it_has_not_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``events --consumer NAME --by-shard`` registers NAME with a per-shard cursor: a
    second run (the flag no longer needed) prints only the rest, the retention removes
    nothing NAME has not read, ``--consumers`` lists its token and ``--forget-consumer``
    lets the retention go on. Seen red: with the acknowledgement after each page left out
    of ``_consumer_events`` (a no-op ``acknowledge``), the second run printed the first
    12 events again (all 30)."""
    data = tmp_path / "data"
    data.mkdir()
    db = data / "courtier.db"
    asyncio.run(fill_outbox(db, 20))
    asyncio.run(fill_outbox(db, 10, host="http://later.test:8080"))
    code, first, err = run(capsys, "--data", str(data), "--consumer", "s", "--by-shard",
                           "--limit", "12")
    assert (code, err) == (0, "") and len(first) == 12
    assert all("shard_pos" in e for e in first)
    assert asyncio.run(prune_everything_read(db)) < 30  # the unread 18 are kept
    code, rest, _ = run(capsys, "--data", str(data), "--consumer", "s")
    assert code == 0 and len(rest) == 18
    keys = [(e["shard"], e["shard_pos"]) for e in first + rest]
    assert len(set(keys)) == 30  # every event once, none lost to the prune
    code, [listed], _ = run(capsys, "--data", str(data), "--consumers")
    assert code == 0 and listed["consumers"] == {} and list(listed["shard_consumers"]) == ["s"]
    assert str(listed["shard_consumers"]["s"]).startswith("c1.")
    assert asyncio.run(prune_everything_read(db)) == 30  # everything read: all removed
    code, [answer], _ = run(capsys, "--data", str(data), "--forget-consumer", "s")
    assert code == 0 and answer["forgotten"] is True and answer["shard_consumers"] == {}
    code, _, err = run(capsys, "--data", str(data), "--by-shard")
    assert code == 2 and "--by-shard: give it with --consumer" in err
