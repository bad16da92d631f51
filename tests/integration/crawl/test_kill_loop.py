"""A bounded form of the kill loop (the long form is bench/kill_loop.py: 20 kills)."""

from __future__ import annotations

from pathlib import Path

import pytest

from courtier.testweb.killloop import kill_loop


@pytest.mark.timeout(240)
async def test_repeated_kill_9_loses_nothing_and_emits_nothing_twice(
    tmp_path: Path, crawl_store: str | None
) -> None:
    report = await kill_loop(tmp_path / "data", kills=4, seed=11, store_url=crawl_store)
    assert report.kills >= 3  # most runs were really killed mid-way
    assert report.missing == []
    assert report.duplicate_events == 0
    assert report.urls_without_event == []
    assert report.warc_files >= 1 and report.warc_problems == []
    assert report.violations_after_restarts == []
