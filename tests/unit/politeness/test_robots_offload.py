"""A big robots.txt is parsed and its group compiled off the event loop's thread."""

from __future__ import annotations

import threading

import pytest

from courtier.politeness import robots_offload
from courtier.politeness.robots import RobotsTxt
from courtier.politeness.robots_offload import INLINE_ROBOTS_BYTES, parse_off_loop

BIG = ("User-agent: *\n" + "".join(f"Disallow: /*p{i}*q\n" for i in range(5_000))).encode()
SMALL = b"User-agent: *\nDisallow: /private/\n"


async def test_a_big_body_is_parsed_in_another_thread_and_comes_back_compiled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(BIG) > INLINE_ROBOTS_BYTES >= len(SMALL)
    threads: list[int] = []
    real = robots_offload.parse_prepared

    def recording(body: bytes, agent: str) -> RobotsTxt:
        threads.append(threading.get_ident())
        return real(body, agent)

    monkeypatch.setattr(robots_offload, "parse_prepared", recording)
    big = await parse_off_loop(BIG, "courtier")
    small = await parse_off_loop(SMALL, "courtier")
    loop_thread = threading.get_ident()
    assert threads[0] != loop_thread and threads[1] == loop_thread
    assert big.digest == RobotsTxt.parse(BIG).digest
    # the group was compiled where it was parsed: the first decision finds it built
    assert "courtier" in big._cache
    assert not big.allowed("courtier", "/p7/x/q") and big.allowed("courtier", "/p7/x")
    assert not small.allowed("courtier", "/private/x")
