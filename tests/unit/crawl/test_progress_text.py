"""Progress text while a one-shot crawl lingers (issue 14): what it waits for, a recent
rate instead of an average that decays toward zero, and what the summary leaves."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from courtier.crawl.progress import status_line, summary_line
from courtier.crawl.progress_text import RecentRate, unfinished_urls_text, waiting_text
from courtier.crawl.status import CrawlStatus
from courtier.politeness.robots_state import RobotsStatus


def host(robots: RobotsStatus, backoff_until: float = 0.0, why: str | None = None) -> Any:
    return SimpleNamespace(robots=SimpleNamespace(status=robots, last_error=why),
                           timing=SimpleNamespace(backoff_until=backoff_until),
                           address_blocked=False)


def test_waiting_names_hosts_reasons_and_the_next_retry() -> None:
    hosts = ([host(RobotsStatus.UNREACHABLE, why="dns")] * 3
             + [host(RobotsStatus.UNREACHABLE, why="http_503")] * 2
             + [host(RobotsStatus.OK, 1060.0)] * 7
             + [host(RobotsStatus.OK, 900.0)] * 3  # back-off over: not waiting
             + [SimpleNamespace(robots=SimpleNamespace(status=RobotsStatus.UNREACHABLE),
                                address_blocked=True)])  # guard-blocked: not waiting
    text = waiting_text(cast(Any, hosts), 1040.0, 1000.0)
    assert text == ("waiting: 12 hosts (robots.txt unreachable: 5 [dns 3, http_503 2],"
                    " back-off 429/5xx: 7), next retry in 40 s")
    assert waiting_text([], None, 1000.0) == ""


def test_the_recent_rate_forgets_the_busy_start() -> None:
    rate = RecentRate(window=10.0)
    for second in range(11):  # 100 pages/s for 10 s
        rate.update(float(second), second * 100)
    assert rate.update(10.0, 1000) == 100.0
    for second in range(11, 31):  # then nothing for 20 s (lingering for retries)
        last = rate.update(float(second), 1000)
    assert last == 0.0  # an average since the start would still say 33 pages/s
    status = CrawlStatus(started_at=0.0, now=30.0, fetched=1000,
                         waiting="waiting: next retry in 40 s")
    line = status_line(status, last)
    assert line.startswith("   0.0 pages/s (last 10 s)")
    assert line.endswith("| waiting: next retry in 40 s")


def test_the_summary_says_what_was_left_for_later_and_why() -> None:
    status = CrawlStatus(started_at=0.0, now=30.0, fetched=10, left_for_later=True,
                         stop_reason="nothing due", left_unfetched=5, left_retrying=2,
                         waiting="waiting: 2 hosts (back-off 429/5xx: 2), next retry in 300 s")
    text = summary_line(status)
    assert ("left for later: 7 URLs unfinished (5 never fetched, 2 retrying); "
            "2 hosts (back-off 429/5xx: 2)") in text
    assert "next retry in 300 s" in text
    only_retries = CrawlStatus(left_for_later=True, left_unfetched=0, left_retrying=3)
    assert "left for later: 3 URLs unfinished (3 retrying); retries due later" in \
        summary_line(only_retries)


def test_the_summary_says_how_long_the_crawl_waited_and_for_what() -> None:
    """Seen red with the waited clause left out of ``summary_line``."""
    robots = "5 hosts (robots.txt unreachable: 5 [http_500 5])"
    status = CrawlStatus(started_at=0.0, now=130.0, fetched=3, stop_reason="nothing due",
                         waited=118.4, waited_for=robots)
    assert summary_line(status).endswith(f"; waited 118 s for {robots}")
    status.waited = 0.4  # a blink is not a wait worth a word
    assert "waited" not in summary_line(status)
    only_urls = CrawlStatus(waited=61.0, waited_for=unfinished_urls_text(0, 1))
    assert summary_line(only_urls).endswith("; waited 61 s for 1 unfinished URL (1 retrying)")
    assert summary_line(CrawlStatus(waited=5.0)).endswith("; waited 5 s for retries")


def test_after_a_wait_what_is_left_does_not_name_the_hosts_again() -> None:
    robots = "1 host (robots.txt unreachable: 1 [http_500 1])"
    status = CrawlStatus(waited=58.0, waited_for=robots, left_for_later=True,
                         left_unfetched=4, left_retrying=0,
                         waiting=f"waiting: {robots}, next retry in 120 s")
    text = summary_line(status)
    assert text.count(robots) == 1
    assert (f"; waited 58 s for {robots}; left for later: 4 URLs unfinished (4 never "
            "fetched); next retry in 120 s (beyond --linger)") in text


def test_unfinished_urls_are_counted_by_kind() -> None:
    assert unfinished_urls_text(0, 0) == ""
    assert unfinished_urls_text(1, 0) == "1 unfinished URL (1 never fetched)"
    assert unfinished_urls_text(1, 2) == "3 unfinished URLs (1 never fetched, 2 retrying)"


def test_one_waiting_host_is_one_host() -> None:
    text = waiting_text([host(RobotsStatus.UNREACHABLE, why="http_500")], None, 1000.0)
    assert text == "waiting: 1 host (robots.txt unreachable: 1 [http_500 1])"
