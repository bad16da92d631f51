"""``courtier search`` output and the bad input of ``courtier index`` / ``search``: one
line naming the flag, exit 2 (cli/index_commands.py).

Checked by breaking it: with ``create=True`` in search a missing index is made empty
(exit 0); without the no-word check of ``match_expression`` ``search !!!`` is a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from courtier.cli.main import EXIT_USAGE, main
from courtier.consumer.index_db import PageEntry, SearchIndex
from courtier.core.shard_cursor import ShardCursor


def make_index(path: Path) -> Path:
    index = SearchIndex.open(path, create=True)
    entries = [PageEntry(f"{n:032x}", url, 1, title, text, f"sha256:{n}", 1.0)
               for n, (url, title, text) in enumerate([
                   ("http://a.test/garden", "Tomato harvest", "red fruit in august"),
                   ("http://a.test/kitchen", "Kitchen", "tomato soup and bread"),
                   ("http://a.test/none", None, "tomato seeds"),
                   ("http://a.test/other", "Other", "nothing here")])]
    index.apply(entries, ShardCursor(), ShardCursor({0: 9}))
    index.close()
    return path


def one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == EXIT_USAGE
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert captured.out == ""
    return lines[0]


def test_search_prints_url_and_title_per_hit_best_first(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "crawl"
    data.mkdir()
    make_index(data / "search.db")
    assert main(["search", "tomato", "--data", str(data)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "http://a.test/garden  Tomato harvest"
    assert sorted(out[1:]) == ["http://a.test/kitchen  Kitchen",
                               "http://a.test/none  (no title)"]
    assert main(["search", "tomato", "soup", "--index", str(data / "search.db"),
                 "--limit", "5"]) == 0
    assert capsys.readouterr().out == "http://a.test/kitchen  Kitchen\n"


def test_search_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = make_index(tmp_path / "s.db")
    assert main(["search", "tomato", "--index", str(path), "--limit", "1", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["total"] == 3 and answer["pages"] == 4 and len(answer["hits"]) == 1
    assert answer["hits"][0]["url"] == "http://a.test/garden"


def test_search_without_a_hit_says_so_on_stderr(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = make_index(tmp_path / "s.db")
    assert main(["search", "zucchini", "--index", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"courtier: no page matches 'zucchini' (4 pages in {path})\n"


def test_search_missing_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = one_error_line(capsys, ["search", "tomato", "--data", str(tmp_path)])
    assert line.startswith(f"courtier: error: --data {tmp_path / 'search.db'}: "
                           "no search index here")
    assert "courtier index" in line
    assert not (tmp_path / "search.db").exists()  # nothing made by a search
    line = one_error_line(capsys, ["search", "tomato", "--index", str(tmp_path / "x.db")])
    assert line.startswith(f"courtier: error: --index {tmp_path / 'x.db'}: no search index")


@pytest.mark.parametrize("words", [[], [""], ["  "], ["!!!"]])
def test_search_empty_query(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            words: list[str]) -> None:
    path = make_index(tmp_path / "s.db")
    line = one_error_line(capsys, ["search", *words, "--index", str(path)])
    assert line.startswith("courtier: error: search: ")
    assert "courtier search polite crawler" in line


def test_search_bad_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = make_index(tmp_path / "s.db")
    line = one_error_line(capsys, ["search", "tomato", "--index", str(path), "--limit", "0"])
    assert line == "courtier: error: --limit 0: give a positive number of hits"


def test_search_a_file_that_is_not_an_index(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not an index\n" * 50)
    line = one_error_line(capsys, ["search", "tomato", "--index", str(notes)])
    assert line.startswith(f"courtier: error: --index {notes}: not a courtier search index")


def test_index_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    cases = [
        (["--data", str(tmp_path), "--batch", "0"], "--batch 0: give 1 to 1000 events"),
        (["--store", "postgresql://127.0.0.1/x", "--api", "127.0.0.1:1"],
         "index: give --store or --api, not both"),
        (["--api", "127.0.0.1:1", "--archive", str(tmp_path)], "--index FILE: "),
        (["--api", "127.0.0.1:1", "--index", str(tmp_path / "s.db")], "--archive ROOT: "),
        (["--data", str(a_file)], f"--data {a_file}: is a file"),
        (["--data", str(tmp_path), "--cursor-file", str(tmp_path / "no" / "c")],
         f"--cursor-file {tmp_path / 'no' / 'c'}: not a file in an existing folder"),
        (["--data", str(tmp_path)], f"--data {tmp_path}: no WARC folder here"),
        (["--data", str(tmp_path / "nope")], f"--data {tmp_path / 'nope'}: no such folder"),
        (["--store", "postgresql://127.0.0.1/x", "--data", str(tmp_path / "nope")],
         f"--data {tmp_path / 'nope'}: no such folder"),
        (["--data", str(tmp_path), "--archive", str(tmp_path / "nope")],
         f"--archive {tmp_path / 'nope'}: no such folder"),
    ]
    for flags, start in cases:
        line = one_error_line(capsys, ["index", *flags])
        assert line.startswith(f"courtier: error: {start}"), (flags, line)
    (tmp_path / "warc").mkdir()
    line = one_error_line(capsys, ["index", "--data", str(tmp_path)])
    assert line.startswith(f"courtier: error: --data {tmp_path}: no crawl database here")
    assert not (tmp_path / "search.db").exists()
