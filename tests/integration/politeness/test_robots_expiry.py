"""robots.txt expires after 24 h on the real stack: a crawl whose clock jumps a day
ahead asks for robots.txt again before its next page. Judged from the server's log."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from courtier.core.clock import RealClock
from courtier.crawl.app import crawl
from courtier.testweb import HostSpec, TestWebServer, WebSpec
from tests.integration.politeness.helpers import config_for

DAY = 24 * 3600.0


class ShiftedClock(RealClock):
    """Real time plus ``shift`` seconds (moved forward by the test, never back)."""

    __slots__ = ("shift",)

    def __init__(self) -> None:
        super().__init__()
        self.shift = 0.0

    def now(self) -> float:
        return super().now() + self.shift


async def crawl_with_jump(tmp_path: Path, jump: float) -> tuple[list[str], int]:
    """Crawl one host; once it has served 3 pages the clock jumps ``jump`` seconds.
    Returns the paths in order and the index of the first request after the jump."""
    spec = WebSpec(hosts=[HostSpec("exp.test", pages=8)])
    clock = ShiftedClock()
    async with TestWebServer(spec) as server:
        config = config_for(server, tmp_path / "d", delay=0.1, max_pages=8)
        task = asyncio.create_task(crawl(config, install_signals=False, clock=clock))
        while len([r for r in server.log if r.path_qs != "/robots.txt"]) < 3:
            assert not task.done(), "the crawl ended before the clock jumped"
            await asyncio.sleep(0.01)  # a poll for a condition, not an ordering sleep
        clock.shift += jump
        jumped_at = len(server.log)  # requests already started when the clock jumped
        await asyncio.wait_for(task, 60)
        return [r.path_qs for r in server.log], jumped_at


@pytest.mark.timeout(120)
async def test_robots_txt_is_fetched_again_after_24_hours(tmp_path: Path) -> None:
    paths, jumped_at = await crawl_with_jump(tmp_path, DAY + 60.0)
    assert paths[0] == "/robots.txt"
    assert paths.count("/robots.txt") == 2, paths
    # a request may have been leased just before the jump; the one after it is robots.txt
    after = paths[jumped_at:]
    assert "/robots.txt" in after[:2], paths
    assert len(paths) > after.index("/robots.txt") + jumped_at + 1  # pages went on after it


@pytest.mark.timeout(120)
async def test_robots_txt_is_kept_for_less_than_24_hours(tmp_path: Path) -> None:
    """The control: a jump just short of a day refetches nothing."""
    paths, _ = await crawl_with_jump(tmp_path, DAY - 600.0)
    assert paths.count("/robots.txt") == 1, paths
