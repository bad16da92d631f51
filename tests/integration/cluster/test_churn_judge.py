"""The churn soak's judgement of shards left without an up owner while no fault is going
on (:meth:`SoakReport.problems`), on made-up watch reads: a lapse is excused only when a
coordinator round longer than the lease TTL is behind it and it ended within the bound.
No processes, no store.
"""

from __future__ import annotations

from tests.integration.cluster.churn import STALL_SLACK, SoakReport
from tests.integration.cluster.coverage import Episode, Read, RoundGap, episodes

BEGAN = 1000.0


def _report(lapses: list[Episode], long_rounds: list[RoundGap]) -> SoakReport:
    return SoakReport(
        began=BEGAN, ended=BEGAN + 180, faults=[], outages=[], quiet_lapses=lapses,
        round_gap=max(long_rounds, key=lambda g: g.seconds,
                      default=RoundGap(1.0, "w0", BEGAN + 10)),
        long_rounds=long_rounds, requests=0, pages=0, events=0, violations=[],
        never_fetched=[], without_event=[], not_recrawled=[], duplicate_events=[],
        version_gaps=[], exit_codes={}, rss=[])


def _lapse(first: float, lasted: float | None, failed: int = 0) -> Episode:
    at = BEGAN + first
    return Episode(at, at + 0.05, at + (lasted or 1.0) - 0.2,
                   None if lasted is None else at + lasted, 1024, failed)


def test_a_lapse_with_no_long_round_behind_it_is_a_problem() -> None:
    problems = _report([_lapse(150.0, 0.5)], []).problems(lambda _: 10.0, stall_bound=12.0)
    assert problems == ["1024 shards without an up owner with no fault going on, "
                        "150.0 s into the soak"]


def test_a_lapse_that_began_in_a_round_longer_than_the_ttl_is_excused() -> None:
    stall = RoundGap(4.88, "w1", BEGAN + 159.0)  # the rounds 154.1 and 159.0 s in
    for first in (154.2, 156.8, 159.0 + STALL_SLACK):
        report = _report([_lapse(first, 2.5)], [stall])
        assert report.stall_behind(report.quiet_lapses[0]) == stall
        assert report.problems(lambda _: 10.0, stall_bound=12.0) == []


def test_a_long_round_that_ended_before_the_lapse_excuses_nothing() -> None:
    stall = RoundGap(4.88, "w1", BEGAN + 159.0)
    for first in (150.0, 159.0 + STALL_SLACK + 0.1):
        report = _report([_lapse(first, 2.5)], [stall])
        assert report.stall_behind(report.quiet_lapses[0]) is None
        assert len(report.problems(lambda _: 10.0, stall_bound=12.0)) == 1


def test_a_lapse_behind_a_long_round_must_still_end_within_the_bound() -> None:
    stall = RoundGap(4.88, "w1", BEGAN + 159.0)
    too_long = _report([_lapse(157.0, 12.5, failed=3)], [stall])
    assert too_long.problems(lambda _: 10.0, stall_bound=12.0) == [
        "1024 shards without an up owner with no fault going on, 157.0 s into the soak "
        "(3 reads of the store failed), behind a round of 4.88 s (w1): owned again after "
        "12.50 s, bound 12.00 s"]
    never = _report([_lapse(157.0, None)], [stall])
    assert "owned again never" in never.problems(lambda _: 10.0, stall_bound=12.0)[0]


def test_episodes_count_the_reads_that_failed() -> None:
    reads = [Read(0.0, 0.1, True, 0, {}), Read(0.2, 0.3, None, 1024, {}),
             Read(0.4, 0.5, False, 12, {}), Read(0.6, 0.7, True, 0, {})]
    (lapse,) = episodes(reads)
    assert (lapse.first, lapse.last, lapse.owned_by, lapse.worst, lapse.failed) == (
        0.2, 0.4, 0.7, 1024, 1)
