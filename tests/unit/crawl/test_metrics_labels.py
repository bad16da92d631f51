"""The bounded label sets of the crawl's metrics: response statuses, politeness violations
by host, re-lease reasons."""

from __future__ import annotations

import pytest

from courtier.crawl.metrics import (
    HANDSHAKE_HOSTS,
    OTHER,
    RE_LEASE_REASONS,
    RESPONSE_STATUSES,
    VIOLATION_HOSTS,
    CrawlMetrics,
    FirstLabels,
    status_label,
)


def samples(metrics: CrawlMetrics, name: str) -> dict[tuple[str, ...], float]:
    """Label values → value of one counter family's ``_total`` samples."""
    return {tuple(s.labels.values()): s.value for f in metrics.registry.collect()
            if f.name == name for s in f.samples if s.name.endswith("_total")}


def test_common_statuses_have_their_own_series_and_every_other_code_shares_one() -> None:
    for status in (200, 301, 302, 304, 404, 410, 429, 500, 503):
        assert status in RESPONSE_STATUSES
        assert status_label(status) == str(status)
    for status in (100, 226, 299, 418, 451, 599, 999):
        assert status_label(status) == OTHER
    metrics = CrawlMetrics()
    for status in range(100, 1000):
        metrics.response(status)
    series = samples(metrics, "courtier_responses")
    assert len(series) == len(RESPONSE_STATUSES) + 1
    assert series[("429",)] == 1 and series[("304",)] == 1
    assert series[(OTHER,)] == 900 - len(RESPONSE_STATUSES)


def test_every_status_and_reason_is_exported_before_it_happens() -> None:
    metrics = CrawlMetrics()
    assert set(samples(metrics, "courtier_responses")) == {
        (str(s),) for s in RESPONSE_STATUSES} | {(OTHER,)}
    assert set(samples(metrics, "courtier_re_leases")) == {(r,) for r in RE_LEASE_REASONS}
    assert set(samples(metrics, "courtier_duplicates")) == {("exact",), ("near",)}
    assert all(v == 0 for v in samples(metrics, "courtier_re_leases").values())


def test_first_labels_keep_the_first_values_and_then_say_other() -> None:
    labels = FirstLabels(3)
    assert [labels.label(v) for v in "abcad"] == ["a", "b", "c", "a", OTHER]
    assert labels.label("b") == "b" and labels.label("e") == OTHER
    assert FirstLabels(3).label(OTHER) == OTHER  # never takes a place of its own


def test_politeness_violations_by_host_are_bounded() -> None:
    metrics = CrawlMetrics()
    hosts = [f"https://h{i}.test" for i in range(VIOLATION_HOSTS + 15)]
    for host in hosts + hosts[:2]:
        metrics.politeness_violation(host)
    series = samples(metrics, "courtier_host_politeness_violations")
    assert len(series) == VIOLATION_HOSTS + 1
    assert series[(hosts[0],)] == 2 and series[(hosts[VIOLATION_HOSTS - 1],)] == 1
    assert (hosts[VIOLATION_HOSTS],) not in series
    assert series[(OTHER,)] == 15
    assert metrics.registry.get_sample_value("courtier_politeness_violations_total") == 37


def test_tls_handshakes_by_host_are_bounded_and_split_by_session() -> None:
    """Seen red with the host label left unbounded (35 host series)."""
    metrics = CrawlMetrics()
    hosts = [f"https://h{i}.test" for i in range(HANDSHAKE_HOSTS + 15)]
    for host in hosts:
        metrics.tls_handshake(host, False)
    metrics.tls_handshake(hosts[0], True)
    series = samples(metrics, "courtier_tls_handshakes")
    assert len({labels[0] for labels in series}) == HANDSHAKE_HOSTS + 1
    assert series[(hosts[0], "new")] == 1 and series[(hosts[0], "resumed")] == 1
    assert (hosts[HANDSHAKE_HOSTS], "new") not in series
    assert series[(OTHER, "new")] == 15


def test_an_unknown_re_lease_reason_is_refused() -> None:
    metrics = CrawlMetrics()
    metrics.re_lease("recovered", 7)
    assert samples(metrics, "courtier_re_leases")[("recovered",)] == 7
    with pytest.raises(ValueError, match="unknown re-lease reason"):
        metrics.re_lease("whatever")
