"""Command-line behaviour that needs no network: usage errors, exit codes, seed problems."""

from __future__ import annotations

from pathlib import Path

import pytest

from courtier.cli.main import EXIT_USAGE, main
from courtier.core.config import CrawlConfig
from courtier.crawl.intake import Intake, Scope, read_seed_lines


def test_unknown_flag_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["crawl", "--no-such-flag"])
    assert exc.value.code == EXIT_USAGE
    assert "--no-such-flag" in capsys.readouterr().err


def test_no_seeds_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crawl", "--data", str(tmp_path / "empty")]) == EXIT_USAGE
    assert "no seeds" in capsys.readouterr().err


def test_missing_seeds_file_names_the_flag(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["crawl", "--data", str(tmp_path / "d"), "--seeds-file",
                 str(tmp_path / "nope.txt"), "--progress", "none"])
    assert code == EXIT_USAGE
    assert "--seeds-file" in capsys.readouterr().err


def test_bad_config_value_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crawl", "--delay", "-3", "http://a.test/"]) == EXIT_USAGE
    assert "--delay" in capsys.readouterr().err


def test_seed_file_problems_are_reported_by_line(tmp_path: Path) -> None:
    path = tmp_path / "seeds.txt"
    path.write_text(
        "# a comment\n"
        "http://good.test/\n"
        "\n"
        "ftp://bad.test/file\n"
        "not_a_url\n"
        "  https://Second.TEST:443/path#frag  \n"
    )
    lines = read_seed_lines(path)
    assert [n for n, _ in lines] == [2, 4, 5, 6]
    intake = Intake(Scope(CrawlConfig(), []))
    rows, problems = intake.seed_urls(lines, str(path), now=0.0)
    assert [r.url for r in rows] == ["http://good.test/", "https://second.test/path"]
    assert [(p.line, p.text) for p in problems] == [(4, "ftp://bad.test/file"),
                                                    (5, "not_a_url")]
    assert str(problems[0]).startswith(f"{path}:4:")
    # seeds define the scope
    assert intake.scope.hosts == {"good.test", "second.test"}


@pytest.mark.parametrize("content", [None, "junk\n"])
def test_bad_ca_file_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        content: str | None) -> None:
    """A missing or non-PEM --ca-file: one line naming the flag and file, exit 2 (red
    when CrawlConfig.validate does not check the file: the crawl started)."""
    pem = tmp_path / "ca.pem"
    if content is not None:
        pem.write_text(content)
    code = main(["crawl", "--data", str(tmp_path / "d"), "--ca-file", str(pem),
                 "--progress", "none", "http://a.test/"])
    assert code == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"courtier: error: --ca-file {pem}:") and "\n" not in err
    assert not (tmp_path / "d").exists()


def test_ca_file_from_toml_and_environment(tmp_path: Path) -> None:
    from courtier.core.config import build_config
    from courtier.testweb.tls import TestCA

    pem = TestCA().write_pem(tmp_path / "ca.pem")
    toml = tmp_path / "c.toml"
    toml.write_text(f'ca-file = "{pem}"\n')
    assert build_config({}, toml, environ={}).ca_file == pem
    assert build_config({}, environ={"COURTIER_CA_FILE": str(pem)}).ca_file == pem


def test_join_is_off_for_crawl_unless_asked_and_on_for_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``crawl --join`` sets ``join``; ``courtier worker`` always joins (cmd_crawl sets it:
    seen red on a scratch copy without that line). The run itself is replaced."""
    import courtier.crawl.app
    from courtier.cli.crawl_flags import config_from_args
    from courtier.cli.main import build_parser, main
    from courtier.crawl.status import CrawlStatus

    seen = []
    monkeypatch.setattr(courtier.crawl.app, "run",
                        lambda config, *_: seen.append(config.join) or CrawlStatus())
    assert config_from_args(build_parser().parse_args(["crawl", "http://a.test/"])).join is False
    assert config_from_args(build_parser().parse_args(
        ["crawl", "--join", "http://a.test/"])).join is True
    assert main(["worker", "--data", str(tmp_path), "--api", "127.0.0.1:0"]) == 0
    assert seen == [True]
