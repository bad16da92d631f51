"""What "under CI" means for the tests, and the guard that fails a CI run that skipped.

``ci_is_on`` reads the ``CI`` environment variable: any value that means true (``true``,
``1``, ``yes``, ``on``, in any case, blanks around it ignored) is CI; anything else,
or no variable, is not. Every "required under CI" check of the suite goes through
``required_under_ci``: it skips the test with the reason outside CI and fails it under
CI, so a missing PostgreSQL, throwaway server, conformance file, S3 server, browser or
compiled SimHash cannot pass a CI run unnoticed.

``SkipGuard`` is the plugin tests/conftest.py registers: under CI it turns a session in
which any test was skipped (xfail and xpass count as skipped) into a failed one, and
lists each skipped test with its reason in the terminal summary.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NoReturn

import pytest

TRUE_VALUES = frozenset({"true", "1", "yes", "on"})


def ci_is_on(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``CI`` (in ``environ``, default the process's) holds a value meaning true."""
    env = os.environ if environ is None else environ
    return env.get("CI", "").strip().lower() in TRUE_VALUES


def required_under_ci(reason: str) -> NoReturn:
    """Skip the calling test with ``reason``; under CI fail it instead."""
    if ci_is_on():
        pytest.fail(f"{reason}; CI requires it (CI={os.environ.get('CI')!r})")
    pytest.skip(f"{reason}; skipped, not passed")


class SkipGuard:
    """Collects skipped (and xfail/xpass) tests; under CI, any of them fails the session."""

    def __init__(self, enforce: bool) -> None:
        self.enforce = enforce
        self.skipped: list[tuple[str, str]] = []

    def _note(self, report: pytest.CollectReport | pytest.TestReport) -> None:
        if hasattr(report, "wasxfail"):
            self.skipped.append((report.nodeid, f"xfail: {report.wasxfail}"))
        elif report.skipped:
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            reason = reason.removeprefix("Skipped: ")
            self.skipped.append((report.nodeid, reason))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._note(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._note(report)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.enforce and self.skipped and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not (self.enforce and self.skipped):
            return
        terminalreporter.section("skipped under CI (a CI run must skip nothing)", red=True)
        for nodeid, reason in self.skipped:
            terminalreporter.line(f"SKIPPED {nodeid}: {reason}")
        terminalreporter.line(f"CI fails: {len(self.skipped)} test(s) skipped")
