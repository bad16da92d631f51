"""The final line of ``courtier crawl`` says how long the crawl waited, and for what.

Two test hosts: one answers, the other's robots.txt answers 500, so a polite crawler
fetches nothing else there and retries robots.txt 60 s later. With ``--linger 70`` the
crawl waits for that retry, makes it (500 again), and ends with the host's URL left for
later (the next retry is 120 s further). The server's log says when robots.txt was asked
for; the crawl's own output is judged against it. About a minute: the wait is the
behaviour under test.
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest

from courtier.testweb import HostSpec, TestWebServer, WebSpec

DOWN, UP = "down.courtier.test", "up.courtier.test"


@pytest.mark.timeout(300)
async def test_the_final_line_says_how_long_the_crawl_waited_and_for_what(
        tmp_path: Path) -> None:
    """Seen red with the waited clause left out of ``summary_line``."""
    spec = WebSpec([HostSpec(DOWN, pages=2, robots="500"), HostSpec(UP, pages=2)])
    async with TestWebServer(spec) as server:
        hosts, seeds = tmp_path / "hosts.txt", tmp_path / "seeds.txt"
        hosts.write_text(server.web.hosts_file_text())
        seeds.write_text("".join(f"{seed}\n" for seed in server.web.seeds()))
        crawl = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "courtier", "crawl", "--resolve", str(hosts),
            "--allow-network", "127.0.0.0/8", "--seeds-file", str(seeds),
            "--data", str(tmp_path / "data"), "--delay", "0", "--linger", "70",
            "--progress", "none", stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(crawl.communicate(), 240)
    assert crawl.returncode == 0, err.decode()
    robots = [r.start for r in server.log if r.host == DOWN and r.path_qs == "/robots.txt"]
    assert len(robots) == 2, robots  # the first attempt and the retry within --linger
    assert [r.path_qs for r in server.log if r.host == DOWN] == ["/robots.txt"] * 2
    final = out.decode().splitlines()[0]
    waited = re.search(r"; waited (\d+) s for 1 host \(robots\.txt unreachable: 1 "
                       r"\[http_500 1\]\);", final)
    assert waited is not None, final
    assert abs(int(waited.group(1)) - (robots[1] - robots[0])) <= 5, (final, robots)
    # what is left is said once, after the wait: the host is not named a second time
    assert re.search(r"\); left for later: \d+ URLs unfinished \(\d+ never fetched\); "
                     r"next retry in 120 s \(beyond --linger\): run again on the same "
                     r"--data to finish them$", final), final
