"""A time budget for parsing pages that look pathological.

The HTML parser is fast on real pages but quadratic on deeply nested markup
(half a megabyte of ``<div>`` takes tens of seconds). Pages with very many
tags are therefore parsed in a child process with a time limit; when it runs
out, the child is killed and the page is kept (archived, committed) without
links. Ordinary pages never pay for the child process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import multiprocessing
from collections.abc import Callable

from courtier.parse.html import ParsedPage, parse_html

log = logging.getLogger("courtier.parse")

#: pages with more tags than this are parsed under the time budget
GUARD_TAGS = 20_000


def needs_guard(body: bytes) -> bool:
    """True for a page with enough markup to make the parser's worst case matter."""
    return body.count(b"<", 0, len(body)) > GUARD_TAGS


def _parse(
    body: bytes, url: str, content_type: str | None, x_robots_tag: str | None, agent: str
) -> ParsedPage:
    return parse_html(body, url, content_type, x_robots_tag, agent_token=agent, want_text=True)


class GuardedParser:
    """Parses in one child process (started on first use, replaced after a timeout)."""

    def __init__(self, timeout: float = 10.0,
                 target: Callable[[bytes, str, str | None, str | None, str], ParsedPage]
                 = _parse) -> None:
        """``target`` runs in the child; it must be importable (module level)."""
        self.timeout = timeout
        self.target = target
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self.timeouts = 0

    def _executor(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn")
            )
        return self._pool

    async def parse(
        self, body: bytes, url: str, content_type: str | None, x_robots_tag: str | None, agent: str
    ) -> ParsedPage | None:
        """The parsed page, or None when the budget ran out (the child is then killed)."""
        loop = asyncio.get_running_loop()
        pool = self._executor()
        future = loop.run_in_executor(pool, self.target, body, url, content_type, x_robots_tag,
                                      agent)
        try:
            return await asyncio.wait_for(future, self.timeout)
        except TimeoutError:
            self.timeouts += 1
            log.warning("parse of %s exceeded %.1f s; kept without links", url, self.timeout)
            self._kill()
            return None
        except concurrent.futures.process.BrokenProcessPool:
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
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
