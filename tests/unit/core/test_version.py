"""`courtier --version` is the installed package's version (pyproject.toml is the one source)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import courtier

ROOT = Path(__file__).resolve().parents[3]


def test_version_flag_matches_package_metadata_and_pyproject() -> None:
    done = subprocess.run([sys.executable, "-m", "courtier", "--version"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert done.stdout.strip() == f"courtier {version('courtier')}" == f"courtier {pyproject}"
    assert courtier.__version__ == pyproject


def test_changelog_has_a_section_for_the_current_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "Keep a Changelog" in text and "## [Unreleased]" in text
    assert f"## [{courtier.__version__}] - " in text
