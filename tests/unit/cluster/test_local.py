"""``crawl --workers N``'s parent (cluster/local.py): which children ended well, what it
says of those that did not, and where it says the WARC files are (issue #36).

Seen red on a scratch edit (restored since): ``_report_failed`` always saying the shards
went to the others; ``_ended_well`` ignoring the signal passed on; ``warc_folders``
naming ``DATA/warc``.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import pytest

from courtier.cluster.local import (
    EXIT_ABORTED,
    _ended_well,
    _report_failed,
    child_configs,
    warc_folders,
)
from courtier.core.config import build_config


def test_a_child_that_reported_and_then_met_the_users_signal_ended_well() -> None:
    assert _ended_well(0, reported=False, forwarded=[])
    assert _ended_well(-signal.SIGINT, reported=True, forwarded=[signal.SIGINT])
    assert _ended_well(EXIT_ABORTED, reported=True, forwarded=[signal.SIGINT] * 2)
    assert not _ended_well(-signal.SIGINT, reported=False, forwarded=[signal.SIGINT])
    assert not _ended_well(-signal.SIGKILL, reported=True, forwarded=[signal.SIGINT])
    assert not _ended_well(1, reported=True, forwarded=[])


def _lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records]


def test_when_every_worker_failed_no_line_says_the_others_took_their_shards(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    _report_failed({"worker-0": -9, "worker-1": -9}, workers=2, interrupts=0, lease_ttl=30)
    [(level, text)] = _lines(caplog)
    assert level == "ERROR"
    assert "still running" not in text and "no other took their shards over" in text
    assert "worker-0 -9, worker-1 -9" in text and "--lease-ttl 30 s" in text


def test_when_some_worker_failed_the_others_still_running_take_over(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    _report_failed({"worker-1": -9}, workers=3, interrupts=0, lease_ttl=30)
    [(level, text)] = _lines(caplog)
    assert level == "ERROR" and "worker-1" in text and "still running took" in text


def test_workers_stopped_by_a_second_signal_are_an_info_line_not_a_failure(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    _report_failed({"worker-0": -15, "worker-1": -15}, workers=2, interrupts=2, lease_ttl=3)
    [(level, text)] = _lines(caplog)
    assert level == "INFO" and "stopped at once" in text and "the others" not in text


def test_the_warc_folders_are_each_workers_own_or_the_archive(tmp_path: Path) -> None:
    config = build_config({"data": tmp_path / "mw", "workers": 3,
                           "store": "postgresql://u@127.0.0.1/db"})
    assert warc_folders(config) == [str(tmp_path / "mw" / f"worker-{i}" / "warc")
                                    for i in range(3)]
    remote = build_config({"data": tmp_path / "mw", "workers": 3,
                           "store": "postgresql://u@127.0.0.1/db",
                           "archive": "s3://bucket/prefix"})
    assert warc_folders(remote) == ["s3://bucket/prefix"]


@pytest.mark.parametrize(("max_pages", "workers"), [(10, 3), (2, 3), (0, 2), (9, 1), (7, 7)])
def test_max_pages_is_the_crawls_split_between_the_children(
        tmp_path: Path, max_pages: int, workers: int) -> None:
    """``crawl --workers N --max-pages M`` issues at most M page fetches in all, not M a
    child (red with the children given the user's value: 30 = 3 × 10 for the first case).
    """
    config = build_config({"data": tmp_path / "mw", "workers": workers,
                           "max_pages": max_pages, "store": "postgresql://u@127.0.0.1/db"})
    shares = [child.max_pages for child in child_configs(config)]
    assert all(share is not None for share in shares)
    assert sum(s for s in shares if s is not None) == max_pages
    assert max(s for s in shares if s is not None) - min(
        s for s in shares if s is not None) <= 1


def test_without_max_pages_no_child_has_a_limit(tmp_path: Path) -> None:
    config = build_config({"data": tmp_path / "mw", "workers": 3,
                           "store": "postgresql://u@127.0.0.1/db"})
    assert [child.max_pages for child in child_configs(config)] == [None, None, None]
