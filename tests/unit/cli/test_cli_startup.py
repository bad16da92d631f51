"""Start-up: help and argument errors must not load the crawler's heavy modules.

A behaviour check (which modules a fresh interpreter has loaded), not a timing:
``bench/README.md`` holds the start-up figures.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("aiohttp", "numpy", "numba", "asyncpg", "courtier.crawl.worker", "courtier.api.server",
         "courtier.store.sqlite", "selectolax", "warcio")

_PROBE = """
import contextlib, io, json, sys
from courtier.cli.main import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def loaded_after(*argv: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    return set(json.loads(out.splitlines()[-1]))


@pytest.mark.parametrize("argv", [("--help",), ("crawl", "--help"), ("stats", "--help"),
                                  ("policy", "get", "--help"), ("crawl", "--no-such-flag")])
def test_help_and_usage_errors_load_no_heavy_module(argv: tuple[str, ...]) -> None:
    modules = loaded_after(*argv)
    assert "courtier.cli.main" in modules  # the probe really ran the CLI
    assert sorted(m for m in HEAVY if m in modules) == []


def test_store_and_api_code_load_without_numpy() -> None:
    # numpy only computes SimHash fingerprints; the query commands read a store
    probe = ("import sys, courtier.store.sqlite, courtier.api.control; "
             "print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60).stdout.strip()
    assert out == "False"


def test_help_and_query_commands_do_not_read_the_package_version(tmp_path: Path) -> None:
    # importlib.metadata (and the email package it loads) cost ~25 ms of every start;
    # only --version, the crawl's User-Agent and the API's document need the version
    from courtier.store.sqlite import SqliteStore

    async def make_store() -> None:
        store = SqliteStore(tmp_path / "courtier.db")
        await store.open()
        await store.close()

    asyncio.run(make_store())
    data = str(tmp_path)
    for argv in (("--help",), ("stats", "--data", data), ("events", "--data", data),
                 ("policy", "get", "--data", data, "a.test"),
                 ("domain", "stats", "--data", data, "a.test")):
        modules = loaded_after(*argv)
        assert "courtier.cli.main" in modules, argv
        assert "importlib.metadata" not in modules, argv
