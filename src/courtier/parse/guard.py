"""A time and memory budget for parsing pages that look pathological.

The HTML parser is fast on real pages but quadratic on deeply nested markup
(half a megabyte of ``<div>`` takes tens of seconds) and on one tag carrying
thousands of distinct attributes (50,000 take about 15 s). Pages with very
many tags, or with one tag longer than :data:`GUARD_TAG_BYTES`, are
therefore parsed in a child process with a time limit and an address-space
limit; when either runs out, the child is killed and the page is kept
(archived, committed) without links. Ordinary pages never pay for the child
process (see :mod:`courtier.parse.offload` for where the others run).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import multiprocessing
import os
import re
import resource
from collections.abc import Callable
from typing import Any, TypeVar

from courtier.core.logs import log_event
from courtier.parse.html import ParsedPage, parse_html

log = logging.getLogger("courtier.parse")
T = TypeVar("T")

#: pages with more tags than this are parsed under the time budget
GUARD_TAGS = 20_000
#: a page with one tag longer than this (attributes by the thousand) is parsed there too
GUARD_TAG_BYTES = 16 * 1024
#: added to the child's nice value (background work, below the event loop)
PARSE_NICENESS = 10
#: address space the child may use (its own interpreter included); past it, MemoryError
PARSE_MEMORY_BYTES = 1536 * 1024 * 1024
# a run of GUARD_TAG_BYTES bytes after a "<" with no "<" or ">": each scan stops at the
# next bracket, so the search is linear in the page
_LONG_TAG = re.compile(b"<[^<>]{%d}" % GUARD_TAG_BYTES)
#: such a run contains a whole aligned block of this many bytes with no ">" (a run of
#: 2 n - 1 bytes contains an aligned block of n): pages where every block holds a ">"
#: skip the regex
_BLOCK = GUARD_TAG_BYTES // 2


def needs_guard(body: bytes) -> bool:
    """True for a page with enough markup to make the parser's worst case matter:
    more than :data:`GUARD_TAGS` ``<`` or one tag over :data:`GUARD_TAG_BYTES`."""
    size = len(body)
    if body.count(b"<", 0, size) > GUARD_TAGS:
        return True
    if size <= GUARD_TAG_BYTES:
        return False
    find = body.find
    if all(find(b">", at, at + _BLOCK) >= 0 for at in range(0, size - _BLOCK + 1, _BLOCK)):
        return False  # no run of GUARD_TAG_BYTES bytes without a ">", so no long tag
    return _LONG_TAG.search(body) is not None


def _limit_memory(limit: int) -> None:
    """Child initializer: cap the address space (a parse past it raises MemoryError) and
    lower the priority, so the crawl's event loop wins the CPU when both want it."""
    with contextlib.suppress(OSError):
        os.nice(PARSE_NICENESS)
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _parse(
    body: bytes, url: str, content_type: str | None, x_robots_tag: str | None, agent: str
) -> ParsedPage:
    return parse_html(body, url, content_type, x_robots_tag, agent_token=agent, want_text=True)


class GuardedParser:
    """Parses in one child process (started on first use, replaced after a timeout)."""

    def __init__(self, timeout: float = 10.0,
                 target: Callable[[bytes, str, str | None, str | None, str], ParsedPage]
                 = _parse, memory_bytes: int = PARSE_MEMORY_BYTES) -> None:
        """``target`` runs in the child; it must be importable (module level)."""
        self.timeout = timeout
        self.target = target
        self.memory_bytes = memory_bytes
        self.failures = 0
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self.timeouts = 0

    def _executor(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                initializer=_limit_memory, initargs=(self.memory_bytes,),
            )
        return self._pool

    async def parse(
        self, body: bytes, url: str, content_type: str | None, x_robots_tag: str | None, agent: str
    ) -> ParsedPage | None:
        """The parsed page, or None when a budget ran out or the child failed (the child
        is then replaced); never raises for any page."""
        return await self.call(url, self.target, body, url, content_type, x_robots_tag, agent)

    async def call(self, url: str, fn: Callable[..., T], *args: Any) -> T | None:
        """``fn(*args)`` in the child under the budgets (``fn`` importable, module level);
        None when a budget ran out or the child failed. ``url`` names it in the log."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor(), fn, *args)
        try:
            async with asyncio.timeout(self.timeout):  # not wait_for: see timed_store.py
                return await future
        except TimeoutError:
            self.timeouts += 1
            log_event(log, logging.WARNING, "parse_timeout", "parse of %s exceeded %.1f s; kept "
                      "without links", url, self.timeout, url=url, reason="time")
        except concurrent.futures.process.BrokenProcessPool:
            self.failures += 1
            log_event(log, logging.WARNING, "parse_crashed",
                      "parse of %s killed its child process; kept without links", url,
                      url=url, reason="child process died")
        except MemoryError:
            self.failures += 1
            log_event(log, logging.WARNING, "parse_memory", "parse of %s exceeded %d bytes; kept "
                      "without links", url, self.memory_bytes, url=url, reason="memory")
        self._kill()
        return None

    def _kill(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the child at once (a parse still running there is abandoned)."""
        self._kill()
