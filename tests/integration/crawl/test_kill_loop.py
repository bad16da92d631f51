"""A bounded form of the kill loop (the long form is bench/kill_loop.py: 20 kills)."""

from __future__ import annotations

from pathlib import Path

import pytest

from courtier.testweb.killloop import kill_loop


@pytest.mark.timeout(240)
async def test_repeated_kill_9_loses_nothing_and_emits_nothing_twice(tmp_path: Path) -> None:
    report = await kill_loop(tmp_path / "data", kills=4, seed=11)
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
