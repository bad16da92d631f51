"""``courtier events --cursor TOKEN`` reads the outbox above a per-shard cursor: every
event once, each shard's in commit order, past one page, and the token to read on from
(stderr, after the events), so a second run prints only what is new.

Seen red: with the loop stopping after its first page, the second run printed 1,000 of
the 1,018 events after the token (the last 18 missing)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from courtier.cli.main import main
from tests.integration.crawl.test_events_drain import fill_outbox, numbers, run


def token_of(err: str) -> str:
    [line] = err.splitlines()
    label, token = line.split(" ")
    assert label == "cursor" and token.startswith("c1.")
    return token


@pytest.mark.timeout(120)
def test_a_shard_cursor_reads_everything_once_and_resumes_from_its_token(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = data / "courtier.db"
    asyncio.run(fill_outbox(db, 1030))
    code, first, err = run(capsys, "--data", str(data), "--cursor", "", "--limit", "12")
    assert code == 0 and numbers(first) == list(range(12))
    code, rest, err = run(capsys, "--data", str(data), "--cursor", token_of(err))
    assert code == 0 and numbers(rest) == list(range(12, 1030))  # one shard: commit order
    assert [e["shard_pos"] for e in first + rest] == list(range(1, 1031))
    token = token_of(err)
    code, none, err = run(capsys, "--data", str(data), "--cursor", token)
    assert (code, none, token_of(err)) == (0, [], token)
    asyncio.run(fill_outbox(db, 5, host="http://later.test:8080"))  # the crawl went on
    code, later, err = run(capsys, "--data", str(data), "--cursor", token)
    assert code == 0 and numbers(later) == list(range(5))
    assert [e["payload"]["url"] for e in later] == [  # type: ignore[index]
        f"http://later.test:8080/page/{n}" for n in range(5)]


@pytest.mark.parametrize("extra", [["--after", "3"], ["--follow"]])
def test_a_shard_cursor_refuses_a_second_cursor(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    code = main(["events", "--data", str(tmp_path), "--cursor", "", *extra])
    err = capsys.readouterr().err
    assert code == 2 and "--cursor: give it without" in err


def test_a_damaged_token_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    asyncio.run(fill_outbox(data / "courtier.db", 1))
    code = main(["events", "--data", str(data), "--cursor", "c1.!!"])
    assert code != 0 and "cursor" in capsys.readouterr().err
