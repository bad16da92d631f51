"""The progress of ``crawl --workers N`` (cluster/local_progress.py): the children's
reports, rate-limited, and the parent's crawl-wide and per-worker lines (issue #36).

Seen red on a scratch edit (restored since): ``ChildReporter`` without its rate limit,
and ``cluster_lines`` without the per-worker lines.
"""

from __future__ import annotations

import dataclasses
import io
from typing import Any

from courtier.cluster.local_progress import PROGRESS, ChildReporter, ClusterProgress
from courtier.crawl.status import CrawlStatus, summed_status


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_child_reports_at_most_once_a_second() -> None:
    sent: list[tuple[str, str, dict[str, Any]]] = []
    clock = FakeMonotonic()
    report = ChildReporter("worker-1", sent.append, clock)
    for fetched in range(5):
        report(CrawlStatus(fetched=fetched))
        clock.now += 0.3
    assert [(kind, name, figures["fetched"]) for kind, name, figures in sent] == [
        (PROGRESS, "worker-1", 0), (PROGRESS, "worker-1", 4)]


def _figures(**values: Any) -> dict[str, Any]:
    return dataclasses.asdict(CrawlStatus(**values))


def test_the_parent_shows_the_crawl_wide_figures_then_each_workers() -> None:
    clock = FakeMonotonic()
    out = io.StringIO()
    display = ClusterProgress(2, "log", out, log_every=5.0, monotonic=clock)
    display.update("worker-1", _figures(now=10.0, fetched=7, queued=3, in_flight=1))
    clock.now += 5.0
    display.show()
    first = out.getvalue().splitlines()
    assert len(first) == 2
    assert "crawl-wide (1 of 2 workers reporting):" in first[0] and "fetched 7 " in first[0]
    display.update("worker-0", _figures(now=11.0, fetched=5, queued=2, in_flight=2))
    display.show()  # not due yet
    assert out.getvalue().splitlines() == first
    clock.now += 5.0
    display.show()
    lines = out.getvalue().splitlines()[2:]
    assert len(lines) == 3
    assert "crawl-wide (2 workers):" in lines[0]
    assert "fetched 12 " in lines[0] and "queued 5 " in lines[0] and "in flight 3 " in lines[0]
    assert "  worker-0: " in lines[1] and "fetched 5 " in lines[1]
    assert "  worker-1: " in lines[2] and "fetched 7 " in lines[2]


def test_nothing_is_shown_before_a_report_nor_with_progress_none() -> None:
    clock = FakeMonotonic()
    out = io.StringIO()
    display = ClusterProgress(2, "log", out, monotonic=clock)
    clock.now += 60
    display.show()
    quiet = ClusterProgress(2, "none", out, monotonic=clock)
    quiet.update("worker-0", _figures(fetched=1))
    clock.now += 60
    quiet.show()
    assert out.getvalue() == ""


def test_summed_figures_add_the_workers_left_counts_and_keep_each_waiting_text() -> None:
    total = summed_status([
        CrawlStatus(started_at=5, now=20, fetched=3, left_for_later=True, left_unfetched=2,
                    left_retrying=1, waiting="waiting: next retry in 40 s",
                    warc_files=["b.warc.gz"]),
        CrawlStatus(started_at=4, now=21, fetched=4, left_for_later=True, left_unfetched=5,
                    left_retrying=0, waiting="waiting: 1 hosts (back-off 429/5xx: 1)",
                    warc_files=["a.warc.gz"]),
    ])
    assert (total.started_at, total.now, total.fetched) == (4, 21, 7)
    assert (total.left_unfetched, total.left_retrying) == (7, 1)
    assert total.waiting == "waiting: next retry in 40 s; 1 hosts (back-off 429/5xx: 1)"
    assert total.warc_files == ["a.warc.gz", "b.warc.gz"]
