"""A bounded form of the kill loop (the long form is bench/kill_loop.py: 20 kills)."""

from __future__ import annotations

from pathlib import Path

import pytest

from courtier.store.base import Event
from courtier.testweb.killloop import final_event_problems, kill_loop, restart_gaps
from courtier.testweb.server import RequestRecord


def event(n: int, url: str, outcome: str) -> Event:
    return Event(n, url.encode(), n, 0.0, {"url": url, "outcome": outcome})


def test_final_event_check_catches_missing_repeated_and_late_events() -> None:
    good = [event(1, "a", "retry"), event(2, "a", "ok"), event(3, "b", "gone")]
    assert final_event_problems(good, ["a", "b"]) == ([], [], [])
    bad = [event(1, "a", "ok"), event(2, "a", "retry"), event(3, "b", "retry"),
           event(4, "c", "ok"), event(5, "c", "redirect")]
    without, several, after = final_event_problems(bad, ["a", "b", "c"])
    assert without == ["b"]                 # only a retry: its cycle never ended
    assert several == ["c"]                 # two cycle-ending events
    assert after == ["a v2 retry", "c v5 redirect"]


def test_restart_gaps_are_measured_per_host_across_each_restart() -> None:
    def rec(host: str, start: float) -> RequestRecord:
        return RequestRecord(host, "/", "GET", start, start + 0.01, 200, None)

    log = [rec("a", 0.0), rec("b", 0.1), rec("a", 1.0), rec("a", 1.1), rec("b", 2.0)]
    gaps = restart_gaps(log, [3], {"a": 0.5}, 0.05)
    assert [(h, round(g, 3), d) for h, g, d in gaps] == [("a", 0.1, 0.5), ("b", 1.9, 0.05)]


@pytest.mark.timeout(240)
async def test_repeated_kill_9_loses_nothing_and_emits_nothing_twice(
    tmp_path: Path, crawl_store: str | None
) -> None:
    report = await kill_loop(tmp_path / "data", kills=4, seed=11, store_url=crawl_store)
    assert report.kills >= 3  # most runs were really killed mid-way
    assert report.missing == []
    assert report.final_exit == 0  # the uninterrupted last run ended cleanly
    assert report.duplicate_events == 0
    # exactly one final (cycle-ending) event per URL, and nothing after it
    assert report.urls_without_event == []
    assert report.urls_with_several_finals == []
    assert report.events_after_final == []
    assert report.warc_files >= 1 and report.warc_problems == []
    # every host at its own delay (Crawl-delay hosts at their Crawl-delay) over all runs
    assert report.violations_after_restarts == []
    crawl_delayed = [g for g in report.restart_gaps if g[2] > 0.05]
    assert crawl_delayed, report.restart_gaps  # a Crawl-delay host spanned a restart
    assert [g for g in report.restart_gaps if g[1] < g[2]] == []
    assert report.ok
