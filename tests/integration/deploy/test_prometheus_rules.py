"""promtool (Debian's prometheus package) checks deploy/prometheus/alerts.yml and runs its tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parents[3] / "deploy" / "prometheus"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool missing under CI=true: .ci/run installs Debian's prometheus")
        pytest.skip("promtool not installed (apt-get install prometheus); CI runs this")
    return found


@pytest.mark.parametrize("args", [["check", "rules", "alerts.yml"],
                                  ["test", "rules", "alerts_test.yml"]])
def test_promtool(args: list[str]) -> None:
    done = subprocess.run([promtool(), *args], cwd=RULES, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
