"""promtool (Debian's prometheus package) checks deploy/prometheus/alerts.yml and runs its tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.ci import required_under_ci

RULES = Path(__file__).resolve().parents[3] / "deploy" / "prometheus"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        required_under_ci("promtool not installed (apt-get install prometheus; "
                          ".ci/run installs it)")
    return found


@pytest.mark.parametrize("args", [["check", "rules", "alerts.yml"],
                                  ["test", "rules", "alerts_test.yml"]])
def test_promtool(args: list[str]) -> None:
    done = subprocess.run([promtool(), *args], cwd=RULES, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
