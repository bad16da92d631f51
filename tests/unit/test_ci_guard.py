"""tests/ci.py: which CI values mean "under CI", and the guard that fails a CI session
that skipped a test.

Seen red on a scratch copy: with ``ci_is_on`` comparing ``== "true"`` (the check this
replaced) the ``1``/``YES``/``On`` cases fail; with ``SkipGuard.pytest_sessionfinish``
emptied the CI session exits 0 and ``test_a_skip_fails_the_session_under_ci`` fails;
with xfail reports not noted the xfail case exits 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.ci import ci_is_on

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("value", ["true", "TRUE", "True", "1", "yes", "YES", "on", "On", " true "])
def test_values_meaning_true_are_ci(value: str) -> None:
    assert ci_is_on({"CI": value})


@pytest.mark.parametrize("value", ["", "0", "false", "no", "off", "n", "truthy", "2"])
def test_other_values_and_no_variable_are_not_ci(value: str) -> None:
    assert not ci_is_on({"CI": value})
    assert not ci_is_on({})


INNER_CONFTEST = """
import pytest
from tests.ci import SkipGuard, ci_is_on

def pytest_configure(config):
    config.pluginmanager.register(SkipGuard(ci_is_on()), "courtier-skip-guard")
"""

INNER_TESTS = {
    "skip": """
import pytest
def test_ok(): pass
def test_skipped(): pytest.skip("no widget here")
""",
    "xfail": """
import pytest
def test_ok(): pass
@pytest.mark.xfail(reason="known widget bug")
def test_xfail(): assert False
""",
    "clean": """
def test_ok(): pass
""",
}


def run_inner(tmp_path: Path, kind: str, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(INNER_CONFTEST)
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER_TESTS[kind]))
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


@pytest.mark.parametrize("ci", ["true", "1", "Yes"])
def test_a_skip_fails_the_session_under_ci(tmp_path: Path, ci: str) -> None:
    done = run_inner(tmp_path, "skip", ci)
    assert done.returncode == 1, done.stdout
    assert "test_inner.py::test_skipped: no widget here" in done.stdout
    assert "CI fails: 1 test(s) skipped" in done.stdout


def test_an_xfail_fails_the_session_under_ci(tmp_path: Path) -> None:
    done = run_inner(tmp_path, "xfail", "true")
    assert done.returncode == 1, done.stdout
    assert "test_inner.py::test_xfail: xfail: known widget bug" in done.stdout


@pytest.mark.parametrize("ci", [None, "false"])
def test_a_skip_outside_ci_leaves_the_session_green(tmp_path: Path, ci: str | None) -> None:
    done = run_inner(tmp_path, "skip", ci)
    assert done.returncode == 0, done.stdout
    assert "CI fails" not in done.stdout


def test_a_ci_session_that_skipped_nothing_passes(tmp_path: Path) -> None:
    done = run_inner(tmp_path, "clean", "true")
    assert done.returncode == 0, done.stdout
