"""Bad input, as a user types it, answered in one line naming the flag, file and line,
exit 2, no traceback (issue #36). Each test runs the real CLI (``courtier.cli.main.main``).

Each was seen red once by breaking the behaviour on a scratch edit (restored since):
``_Parser.error`` printing the usage block again, ``make_data_dir`` not called,
``split_seed_line`` back to one seed per line, ``refuse_all_bad_seeds`` returning at
once, ``did_you_mean`` returning "", ``api_address`` without the URL form, the
``--api-port``/``--api-host`` messages restored, ``must_exist=True`` for ``seed add``,
``make_data_dir`` dropped from ``cmd_demo``, the ``--resolve`` prefix dropped in app.py.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

import pytest

from courtier.cli.main import EXIT_USAGE, build_parser, main
from courtier.core.config import CrawlConfig, api_address, api_base_url
from courtier.core.errors import ConfigError
from courtier.crawl.intake import Intake, Scope, read_seed_lines, split_seed_line

SRC = Path(__file__).resolve().parents[3] / "src" / "courtier"


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    """stderr lines of a command argparse refuses (SystemExit 2)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err.splitlines()


def _config_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one stderr line of a command refused with exit 2 (no traceback)."""
    assert main(argv) == EXIT_USAGE
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_flag_that_is_not_a_number_is_one_line_not_a_usage_block(
        capsys: pytest.CaptureFixture[str]) -> None:
    lines = _usage_error(["crawl", "--delay", "fast", "http://a.test/"], capsys)
    assert lines == ["courtier crawl: --delay: 'fast' is not a number of seconds",
                     "(see 'courtier crawl --help')"]


@pytest.mark.parametrize(("argv", "first"), [
    (["seed", "add", "--priority", "high"],
     "courtier seed add: --priority: 'high' is not a whole number"),
    (["crawl", "--scope", "everything"], "courtier crawl: --scope: invalid choice: "),
    (["crawl", "--no-such-flag"], "courtier: unrecognized arguments: --no-such-flag"),
    (["crawll"], "courtier: unknown command 'crawll'"),
    (["policy"], "courtier policy: the following arguments are required: action"),
])
def test_every_usage_error_is_one_line_and_a_hint(
        argv: list[str], first: str, capsys: pytest.CaptureFixture[str]) -> None:
    lines = _usage_error(argv, capsys)
    assert len(lines) == 2 and lines[0].startswith(first), lines
    assert lines[1].endswith("--help')")


def test_data_naming_a_file_is_one_line(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    line = _config_error(["crawl", "--data", str(a_file), "http://a.test/"], capsys)
    assert line == (f"courtier: error: --data {a_file}: is a file, not a folder; name a "
                    "folder (it is created if missing)")
    line = _config_error(["seed", "add", "http://a.test/", "--data", str(a_file)], capsys)
    assert f"--data {a_file}: is a file" in line


def test_data_that_cannot_be_created_is_one_line(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    line = _config_error(["crawl", "--data", "/proc/x", "http://a.test/"], capsys)
    assert line.startswith("courtier: error: --data /proc/x: cannot create the folder: ")
    a_file = tmp_path / "f"
    a_file.write_text("x")
    line = _config_error(["crawl", "--data", str(a_file / "sub"), "http://a.test/"], capsys)
    assert f"--data {a_file / 'sub'}: cannot create the folder" in line


def test_seed_lines_comments_whitespace_and_commas(tmp_path: Path) -> None:
    path = tmp_path / "seeds.txt"
    path.write_text("http://h.test/ # the home page\n"
                    "http://a.test/, http://b.test/\n"
                    "http://c.test/x http://c.test/y\t# two\n"
                    "http://h.test/#top\n"
                    "http://h.test/a,b\n"
                    "http://d.test/,http://e.test/\n"
                    "   # only a comment\n"
                    "not-a-url\n")
    assert read_seed_lines(path) == [
        (1, "http://h.test/"), (2, "http://a.test/"), (2, "http://b.test/"),
        (3, "http://c.test/x"), (3, "http://c.test/y"), (4, "http://h.test/#top"),
        (5, "http://h.test/a,b"), (6, "http://d.test/"), (6, "http://e.test/"),
        (8, "not-a-url")]
    rows, problems = Intake(Scope(CrawlConfig(), [])).seed_urls(
        read_seed_lines(path), str(path), now=0.0)
    assert "http://h.test/" in [r.url for r in rows]  # not http://h.test/%20
    assert not any("%20" in r.url for r in rows)
    assert [str(p).split(": ")[0] for p in problems] == [f"{path}:8"]
    assert split_seed_line("a, b") == ["a", "b"]


def test_every_seed_invalid_exits_2_naming_them(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d"
    line = _config_error(["crawl", "htp://x", "--data", str(data)], capsys)
    assert line.startswith("courtier: error: no valid seed, nothing to crawl: ")
    assert "'htp://x'" in line and "unsupported scheme 'htp'" in line
    assert not data.exists()  # refused before anything was made
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# mine\nwww.example.com  # no scheme\n")
    line = _config_error(["crawl", "--seeds-file", str(seeds), "--data", str(data)], capsys)
    assert f"{seeds}:2:" in line and "'www.example.com'" in line


def test_seed_add_file_names_bad_lines_and_adds_the_good_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/ # comment\nnope, http://b.test/x\n")
    data = tmp_path / "new-crawl"
    assert main(["seed", "add", "--json", "--file", str(seeds), "--data", str(data)]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"courtier: skipped seed {seeds}:2: not a valid absolute URL "
                                "(WHATWG parsing failed, no base given): 'nope': 'nope'"]
    answer = json.loads(out)
    assert [r["canonical"] for r in answer["results"]] == ["http://a.test/", "http://b.test/x"]
    seeds.write_text("nope\n")
    line = _config_error(["seed", "add", "--file", str(seeds), "--data", str(data)], capsys)
    assert line.startswith(f"courtier: error: --file {seeds}: no valid seed")


def test_unknown_config_key_names_file_line_and_a_close_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "crawl.toml"
    path.write_text("delay = 2\nconcurency = 8\n")
    line = _config_error(["crawl", "--config", str(path), "http://a.test/"], capsys)
    assert line == (f"courtier: error: --config {path}:2: unknown key 'concurency'; "
                    "did you mean 'concurrency'?")
    path.write_text("max_in_flight_per_hots = 2\n")
    line = _config_error(["crawl", "--config", str(path), "http://a.test/"], capsys)
    assert line.endswith("did you mean 'max_in_flight_per_host'?")
    path.write_text("zzz = 1\n")
    line = _config_error(["crawl", "--config", str(path), "http://a.test/"], capsys)
    assert line.endswith("unknown key 'zzz'")


def _known_flags() -> set[str]:
    known: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            known.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    walk(child)

    walk(build_parser())
    return known


#: flags of scripts outside the CLI that src/ mentions (bench/crawl_vs_scrapy.py,
#: bench/store_bench.py)
OTHER_PROGRAMS_FLAGS = {"--figures-out", "--citus"}


def test_every_flag_a_message_names_is_a_flag_the_cli_knows() -> None:
    """Every ``--flag`` written in a string of src/courtier (messages, help) is one the
    parser knows: ``--api-port 8790: cannot listen`` named a flag that does not exist."""
    known = _known_flags() | OTHER_PROGRAMS_FLAGS
    unknown: list[str] = []
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 100, SRC  # the walk found the package
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", node.value):
                    if flag not in known:
                        unknown.append(f"{path.relative_to(SRC)}:{node.lineno}: {flag}")
    assert unknown == []


async def test_api_binding_errors_name_the_api_flag() -> None:
    from courtier.api.server import make_app, start_api

    async def metrics() -> bytes:
        return b""

    with pytest.raises(ConfigError) as exc:
        await start_api(make_app(None, metrics, None), "0.0.0.0", 0)  # type: ignore[arg-type]
    assert str(exc.value).startswith("--api 0.0.0.0: ")
    with pytest.raises(ConfigError) as exc:
        await start_api(make_app(None, metrics, None), "192.0.2.1", 0)  # type: ignore[arg-type]
    assert str(exc.value).startswith("--api 192.0.2.1: ")
    assert "--api" in _known_flags()


@pytest.mark.parametrize("text", ["127.0.0.1:8790", "http://127.0.0.1:8790",
                                  "http://127.0.0.1:8790/"])
def test_both_api_forms_mean_the_same_address(text: str) -> None:
    assert api_address(text) == ("127.0.0.1", 8790)
    assert api_base_url(text) == "http://127.0.0.1:8790"


def test_ipv6_api_forms() -> None:
    assert api_address("[::1]:8790") == api_address("http://[::1]:8790") == ("::1", 8790)
    assert api_base_url("[::1]:8790") == "http://[::1]:8790"
    assert api_base_url("https://crawler.example/admin/") == "https://crawler.example/admin"


@pytest.mark.parametrize("text", ["nope", "ftp://h:1", "http://h:99999", "h:1/x",
                                  "http://h:1/path"])
def test_a_bad_api_value_names_the_flag(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^--api "):
        api_address(text)


def test_query_commands_answer_a_bad_api_in_one_line(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    line = _config_error(["stats", "--api", "nope"], capsys)
    assert line.startswith("courtier: error: --api 'nope': expected HOST:PORT or http://")
    line = _config_error(["crawl", "--api", "ftp://h:1", "http://a.test/"], capsys)
    assert line.startswith("courtier: error: --api 'ftp://h:1': expected HOST:PORT")


def test_configuration_commands_create_a_new_embedded_crawl(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seeded, policed = tmp_path / "seeded", tmp_path / "policed"
    assert main(["seed", "add", "--json", "http://a.test/", "--data", str(seeded)]) == 0
    assert json.loads(capsys.readouterr().out)["accepted"] == 1
    assert (seeded / "courtier.db").exists()
    assert main(["policy", "set", "b.test", "--delay", "3", "--data", str(policed)]) == 0
    assert json.loads(capsys.readouterr().out)["policy"]["delay"] == 3.0
    assert main(["policy", "clear", "b.test", "--data", str(tmp_path / "cleared")]) == 0
    capsys.readouterr()
    assert main(["stats", "--data", str(seeded)]) == 0
    assert json.loads(capsys.readouterr().out)["store"]["queued"] == 1


@pytest.mark.parametrize("argv", [["stats"], ["url", "http://a.test/"], ["events"],
                                  ["policy", "get", "a.test"], ["domain", "stats", "a.test"]])
def test_read_only_commands_refuse_a_missing_crawl_in_one_line(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "new-crawl"
    line = _config_error([*argv, "--data", str(data)], capsys)
    assert line == (f"courtier: error: --data {data}: no crawl database here "
                    f"({data / 'courtier.db'} does not exist)")
    assert not data.exists()


def test_demo_data_naming_a_file_is_one_line(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    line = _config_error(["demo", "--data", str(a_file), "--progress", "none"], capsys)
    assert line.startswith(f"courtier: error: --data {a_file}: is a file")


def test_a_bad_hosts_file_names_resolve_file_and_line(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("# test web\n1.2.3 a.test\n")
    line = _config_error(["crawl", "--resolve", str(hosts), "--data", str(tmp_path / "d"),
                          "--progress", "none", "http://a.test/"], capsys)
    assert line == f"courtier: error: --resolve {hosts}:2: '1.2.3' is not an IP address"


def test_seed_add_prints_one_summary_line_unless_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #36: ``seed add`` printed ~7 JSON lines per URL. Now one line on stdout, and
    each refused URL named on stderr; ``--json`` gives the API's answer. Red with the
    summary branch removed from run_query."""
    data = tmp_path / "crawl"
    argv = ["seed", "add", "http://a.test/", "http://a.test/b", "ftp://x", "--data", str(data)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["courtier: 2 seeds added, 0 already known, 1 rejected"]
    assert err.splitlines() == ["courtier: rejected seed 'ftp://x': bad URL: unsupported "
                                "scheme 'ftp' in 'ftp://x': only http and https are crawlable"]
    assert main(["seed", "add", "http://a.test/", "--data", str(data), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["duplicate"] == 1 and answer["results"][0]["result"] == "duplicate"
