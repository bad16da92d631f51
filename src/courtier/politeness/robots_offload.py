"""Where a robots.txt is parsed and compiled, so that none keeps the event loop busy.

Parsing 500 KiB of rules and compiling the crawler's group from them takes
~0.1 s of pure-Python work; a body small enough to cost a few milliseconds
(:data:`INLINE_ROBOTS_BYTES`) is handled inline, a bigger one in a worker
thread at a lower priority (nice +10, as the page parsers). That work is
bytecode, so the thread gives the interpreter lock back every switch
interval (5 ms) and the loop keeps running. The group of
``agent`` is compiled in the same place (:meth:`RobotsTxt.prepare`), so the
frontier's first decision does not pay for it on the loop. Decisions
themselves are taken in bounded turns (``frontier/robots_turns.py``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Final

from courtier.parse.offload import _lower_priority
from courtier.politeness.robots import MAX_ROBOTS_BYTES, RobotsTxt

#: robots.txt bodies up to this are parsed and compiled on the loop (≤ ~3 ms)
INLINE_ROBOTS_BYTES: Final = 16 * 1024


def parse_prepared(body: bytes, agent: str) -> RobotsTxt:
    """Parse ``body`` (its first :data:`MAX_ROBOTS_BYTES`) and compile ``agent``'s group."""
    return RobotsTxt.parse(body[:MAX_ROBOTS_BYTES]).prepare(agent)


_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    """One thread at a lower priority (nice +10): the loop's thread wins the CPU."""
    global _pool  # one lazily made pool per process
    if _pool is None:
        _pool = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="courtier-robots", initializer=_lower_priority)
    return _pool


async def parse_off_loop(body: bytes, agent: str) -> RobotsTxt:
    """:func:`parse_prepared`, in a worker thread unless ``body`` is small."""
    if len(body) <= INLINE_ROBOTS_BYTES:
        return parse_prepared(body, agent)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(), parse_prepared, body, agent)
