"""The dashboard page in a real headless Chromium against a live crawl of the test web.

Needs Debian's Chromium (``apt-get install -y chromium``) and Playwright for
Python (``pip install playwright``; no ``playwright install``: the system
browser is used). Without them the test skips, saying why — except under CI
(``CI`` set to any true value: tests/ci.py), where it fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from courtier.core.urls import canonicalize
from courtier.testweb import default_web
from tests.ci import required_under_ci
from tests.integration.api.crawl_harness import live_crawl

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


async def text_until(page: Any, selector: str, check: Callable[[str], bool]) -> str:
    """Poll an element's text from Python (the page's CSP forbids eval-based waits); no
    deadline of its own: pytest-timeout fails a test whose text never comes."""
    while True:
        text = await page.text_content(selector) or ""
        if check(text):
            return text
        await asyncio.sleep(0.1)


def browser_or_skip() -> Any:
    """The Playwright async entry point, or skip (fail in CI) when the browser is missing."""
    problem = None
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        problem = "playwright is not installed (pip install playwright)"
    if problem is None and not CHROMIUM.exists():
        problem = f"{CHROMIUM} is missing (apt-get install -y chromium)"
    if problem is not None:
        required_under_ci(f"dashboard browser test cannot run: {problem}")
    return async_playwright


@pytest.mark.timeout(90)
async def test_dashboard_shows_live_rates_and_domain_lookup(tmp_path: Path) -> None:
    async_playwright = browser_or_skip()
    spec = default_web(n_hosts=4, pages_per_host=25, crawl_delay=0.1)
    async with live_crawl(spec, tmp_path, token="dash") as crawl, async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            await page.goto(f"{crawl.api_url}/?interval=300#token=dash", timeout=15_000)
            # pages/s goes above zero while the crawl runs
            await text_until(page, "#pages-rate", lambda t: float(t or 0) > 0)
            assert await page.text_content("#state") == "crawling"
            assert (await page.text_content("#violations")) == "0"
            assert "n/a" in (await page.text_content("#budget-pages") or "")
            seed = crawl.server.web.seeds()[0]
            host_key = canonicalize(seed).host_key
            await page.fill("#search", host_key.split("://", 1)[1])
            await page.click("button[type=submit]")
            await text_until(page, "#search-summary", lambda t: "queue" in t)
            summary = await page.text_content("#search-summary") or ""
            assert host_key in summary and "robots.txt" in summary and "ok" in summary
            raw = await page.text_content("#search-result") or ""
            assert '"host_key"' in raw and "error:" not in raw
            assert errors == []
        finally:
            await browser.close()
