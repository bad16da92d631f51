"""``courtier demo`` as a newcomer runs it (issue #36): its last lines say what the host
broken on purpose is for (a rerun will not finish its URLs) and what to try next — the
test web served until stopped, a 3-worker crawl, the dashboard.

Seen red on a scratch edit (restored since): ``demo_epilogue`` not printed, and
``broken_hosts_lines`` returning nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from courtier.cli.main import main

pytestmark = pytest.mark.timeout(120)


def test_the_demo_ends_saying_what_the_broken_host_is_for_and_what_to_try_next(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--data", str(tmp_path / "demo"), "--hosts", "6", "--pages", "2",
                 "--delay", "0.05", "--progress", "none"])
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    summary = next(line for line in out if "robots.txt unreachable: 1" in line)
    assert "run again on the same --data" in summary  # the promise the next lines qualify
    broken = [line for line in out if line.startswith("broken on purpose: ")]
    assert len(broken) == 1
    assert "h03.courtier.test" in broken[0] and "500" in broken[0]
    assert "however often the crawl is run again" in broken[0]
    tail = "\n".join(out[out.index(broken[0]):])
    assert "courtier testweb serve" in tail
    assert "--workers 3" in tail
    assert "--api 127.0.0.1:8790" in tail and "dashboard" in tail
