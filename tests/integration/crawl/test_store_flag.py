"""``--store`` / ``COURTIER_STORE``: PostgreSQL for every command that reads or writes a
crawl; bad values (unknown scheme, unreachable server, refused login) are one line
naming ``--store`` and exit 2."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from courtier.cli.main import main
from tests.pg import PG_HOST, PG_PORT, PG_USER


def unused_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("command", [["stats"], ["events"], ["export", "audit"],
                                     ["url", "http://a.test/"], ["crawl", "http://a.test/"]])
def test_unknown_scheme_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                         command: list[str]) -> None:
    code, _, err = run(capsys, *command, "--data", str(tmp_path), "--store",
                         "mysql://root@127.0.0.1/crawl")
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "--store" in err and "'mysql'" in err
    assert not (tmp_path / "courtier.db").exists()


def test_unreachable_server_is_one_line_exit_2(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    port = unused_loopback_port()
    code, _, err = run(capsys, "stats", "--data", str(tmp_path), "--store",
                       f"postgresql://root:secret@127.0.0.1:{port}/crawl")
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "--store" in line and f"127.0.0.1:{port}" in line
    assert "secret" not in line  # never the password


def test_refused_login_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          pg_dsn: str) -> None:
    # The local server trusts loopback (no password check to fail), so the refused
    # logins tested are an unknown role and an unknown database.
    for store in (f"postgresql://no_such_role_courtier@{PG_HOST}:{PG_PORT}/postgres",
                  f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/no_such_db_courtier"):
        code, _, err = run(capsys, "seed", "add", "http://a.test/", "--data", str(tmp_path),
                           "--store", store)
        assert code == 2, err
        (line,) = err.strip().splitlines()
        assert "--store" in line and "does not exist" in line


def test_commands_share_one_postgres_store(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path, pg_dsn: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\nhttp://b.test/x\n# comment\n")
    code, out, _ = run(capsys, "seed", "add", "--json", "--file", str(seeds),
                       "--data", str(tmp_path), "--store", pg_dsn)
    assert code == 0 and [r["result"] for r in json.loads(out)["results"]] == ["accepted"] * 2
    assert not (tmp_path / "courtier.db").exists()  # nothing written to SQLite
    monkeypatch.setenv("COURTIER_STORE", pg_dsn)
    code, out, _ = run(capsys, "stats", "--data", str(tmp_path))
    assert code == 0 and json.loads(out)["store"]["urls"] == 2
    code, out, _ = run(capsys, "url", "http://b.test/x", "--data", str(tmp_path))
    assert code == 0 and json.loads(out)["url"]["url"] == "http://b.test/x"
    code, out, _ = run(capsys, "export", "audit", "--data", str(tmp_path))
    assert code == 0 and out == ""
    code, out, _ = run(capsys, "events", "--data", str(tmp_path))
    assert code == 0 and out == ""
    code, out, _ = run(capsys, "policy", "set", "a.test", "--delay", "3", "--data",
                       str(tmp_path))
    assert code == 0
    code, out, _ = run(capsys, "domain", "stats", "a.test", "--data", str(tmp_path),
                       "--store", pg_dsn)
    assert code == 0
