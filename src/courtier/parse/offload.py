"""Where a fetched document is parsed, so that none keeps the event loop busy.

The crawler is one asyncio loop per process; the rule (DESIGN §3) is that no
single page, sitemap or robots.txt holds it for more than about 50 ms. The
placement, from measurements on this project's 2-core machine (see
docs/design.md, "Parsing off the loop"):

* **inline** — HTML up to :data:`INLINE_HTML_BYTES` and sitemaps of at most
  :data:`INLINE_SITEMAP_BYTES` of XML (a gzipped one too when its whole
  inflated text is that small, checked by inflating at most that much): a few
  milliseconds at most, cheaper than a hand-off to a thread or a child;
* **thread** — every other ordinary page. Lexbor parses with the GIL
  released, so the loop keeps running; the thread runs at a lower priority
  (nice +10, per thread on Linux). A page gets ``timeout`` seconds from its start in
  the thread (:mod:`courtier.parse.thread_budget`: the wait for a thread is not
  counted while the threads make progress), after
  which its result is ignored and the page is kept without links (a thread
  cannot be killed; pathological pages never get here);
* **child process** — pages that look pathological
  (:func:`courtier.parse.guard.needs_guard`: very many tags or one huge
  tag), where the parser is quadratic, and every sitemap above the inline
  size (a gzipped one unless it inflates to at most the inline size: 20 KB can
  inflate to 50 MB). The sitemap reader
  is pure-Python-driven XML work that holds the GIL, and a thread holding it
  stalled the loop by up to ~140 ms on the loaded machine; a child shares no
  GIL. Each kind has its own child (nice +10) with a hard timeout (killed
  on overrun) and an address-space cap; the sitemap reader also stops
  itself at ``timeout`` and keeps what it read, and its memory is bounded by
  the streaming reader (:mod:`courtier.parse.sitemaps`).

Every failure is an outcome of that URL (kept without links, or a cut
sitemap), never an exception out of the crawl.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from courtier.core.logs import log_event
from courtier.parse.guard import PARSE_NICENESS, GuardedParser, needs_guard
from courtier.parse.html import ParsedPage, parse_html, parse_page_words
from courtier.parse.sitemap_source import GZIP_MAGIC, SitemapSource
from courtier.parse.sitemaps import SitemapResult, parse_sitemap
from courtier.parse.thread_budget import BudgetedThreads

log = logging.getLogger("courtier.parse")

#: HTML bodies up to this are parsed on the loop (measured ≤ 2 ms)
INLINE_HTML_BYTES = 64 * 1024
#: uncompressed sitemaps up to this are parsed on the loop
INLINE_SITEMAP_BYTES = 32 * 1024
PARSE_THREADS = 2
SITEMAP_KILL_MARGIN = 5.0  # seconds past the sitemap reader's own time budget

Placement = Literal["inline", "thread", "process"]
T = TypeVar("T")


def html_placement(body: bytes) -> Placement:
    """Where an HTML body is parsed (pure; see the module docstring)."""
    if needs_guard(body):
        return "process"
    return "inline" if len(body) <= INLINE_HTML_BYTES else "thread"


def sitemap_placement(body: bytes) -> Placement:
    """Where a sitemap body is parsed: inline when at most :data:`INLINE_SITEMAP_BYTES`
    of XML, a gzipped one too when its whole text inflates to at most that much (only
    a body of at most that size is tried, and inflated no further than that size, so
    the check itself is bounded); else "thread" (the caller's child process)."""
    if len(body) > INLINE_SITEMAP_BYTES:
        return "thread"
    if body.startswith(GZIP_MAGIC) and not inflates_within(body, INLINE_SITEMAP_BYTES):
        return "thread"
    return "inline"


def inflates_within(body: bytes, limit: int) -> bool:
    """Whether gzipped ``body`` inflates, every member, to at most ``limit`` bytes
    without an error (as :class:`~courtier.parse.sitemap_source.SitemapSource` reads
    it); at most ``limit`` + 1 bytes are inflated to tell."""
    problems = _Problems()
    SitemapSource(body, limit, problems).read()
    return not problems.truncated and not problems.failed


class _Problems:
    """What :func:`inflates_within` learns from the source."""

    def __init__(self) -> None:
        self.truncated = False
        self.failed = False

    def cut(self, reason: str) -> None:
        self.truncated = True

    def error(self, message: str) -> None:
        self.failed = True


def _lower_priority() -> None:
    """Thread initializer: on Linux the nice value is per thread; a parse thread yields
    the CPU to the event loop's thread when both want it."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), PARSE_NICENESS)


def _parse_sitemap(body: bytes, url: str, budget: float) -> SitemapResult:
    return parse_sitemap(body, url, time_budget=budget)


def _timed(fn: Callable[..., T], *args: Any) -> tuple[float, T]:
    """``fn(*args)`` and when it started (``time.monotonic``: one clock for the whole
    machine on Linux, so a child's start compares with the parent's hand-off)."""
    return time.monotonic(), fn(*args)


def _parse_page(body: bytes, url: str, content_type: str | None, x_robots_tag: str | None,
                agent: str) -> ParsedPage:
    return parse_html(body, url, content_type, x_robots_tag, agent_token=agent, want_text=True)


class OffLoopParser:
    """Parses HTML pages and sitemaps inline, in a thread or in a child process."""

    def __init__(self, timeout: float = 10.0, threads: int = PARSE_THREADS,
                 guarded: GuardedParser | None = None,
                 on_wait: Callable[[float], None] | None = None,
                 collapse_text: bool = True) -> None:
        """``collapse_text=False`` (the crawl: its pages' text only feeds SimHash) parses
        in a thread as :func:`parse_page_words` does (the child process, for the rare
        pathological page, still collapses: the words are the same). ``on_wait`` is told
        how many seconds each document handed off the loop waited for its thread or child
        process to start it (not called for a parse that failed or overran its budget: its
        start is unknown)."""
        self.timeout = timeout
        self.on_wait = on_wait
        self._parse_page = _parse_page if collapse_text else parse_page_words
        #: documents handed to a thread or child process, not yet parsed (or given up)
        self.unfinished = 0
        self.guarded = guarded or GuardedParser(timeout=timeout)
        # its own child: a page stuck in the other one does not hold sitemaps back; the
        # reader stops itself at ``timeout``, the kill comes a little later
        self.sitemap_child = GuardedParser(timeout=timeout + SITEMAP_KILL_MARGIN)
        self._threads = BudgetedThreads(threads, timeout, _lower_priority, "courtier-parse")
        self.thread_timeouts = 0

    async def html(self, body: bytes, url: str, content_type: str | None,
                   x_robots_tag: str | None, agent: str
                   ) -> ParsedPage | Literal[False] | None:
        """The parsed page; None when its budget ran out (keep it without links);
        False for a small page the caller parses inline."""
        where = html_placement(body)
        if where == "inline":
            return False
        if where == "process":
            guarded = self.guarded
            return await self._waited(guarded.call(url, _timed, guarded.target, body, url,
                                                   content_type, x_robots_tag, agent))
        # the budget counts from the parse's start in a thread, not from the hand-off
        # (thread_budget.py: under load, pages waiting for a thread overran it)
        parsed = await self._waited(self._threads.call(self._parse_page, body, url,
                                                       content_type, x_robots_tag, agent))
        if parsed is None:
            # a thread cannot be killed: it finishes on its own (pathological pages go
            # to the child process, so this is rare) and its result is dropped
            self.thread_timeouts += 1
            log_event(log, logging.WARNING, "parse_timeout",
                      "parse of %s exceeded %.1f s in a thread (or waited that long for "
                      "threads that all overran); kept without links",
                      url, self.timeout, url=url, reason="time")
        return parsed

    async def sitemap(self, body: bytes, url: str) -> SitemapResult:
        """The sitemap's entries, cut (``truncated``) when its time budget ran out."""
        if sitemap_placement(body) == "inline":
            return parse_sitemap(body, url, time_budget=self.timeout)
        result = await self._waited(self.sitemap_child.call(url, _timed, _parse_sitemap, body,
                                                            url, self.timeout))
        if result is None:
            result = SitemapResult()
            result.cut("sitemap parse failed or overran its budget (nothing read)")
        return result

    async def _waited(self, work: Awaitable[tuple[float, T] | None]) -> T | None:
        """The result of a parse handed off the loop now; counted in :attr:`unfinished`
        until it ends, and its wait reported to ``on_wait``."""
        handed = time.monotonic()
        self.unfinished += 1
        try:
            timed = await work
        finally:
            self.unfinished -= 1
        if timed is None:
            return None
        started, result = timed
        if self.on_wait is not None:
            self.on_wait(max(0.0, started - handed))
        return result

    def close(self) -> None:
        """Stop the pools without waiting for a parse still running in a thread."""
        self._threads.close()
        self.guarded.close()
        self.sitemap_child.close()
