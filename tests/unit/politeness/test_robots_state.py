"""RFC 9309 §2.3.1 status rules of the per-host robots state machine."""

from __future__ import annotations

import pytest

from courtier.politeness.robots_state import RobotsPolicy, RobotsState, RobotsStatus

POLICY = RobotsPolicy(expiry=1000.0, retry_base=60.0, retry_max=600.0)
BODY = b"User-agent: *\nDisallow: /no\n"


def test_2xx_parses_and_obeys_until_expiry() -> None:
    state = RobotsState()
    assert state.needs_fetch(0.0)
    state.on_response(200, BODY, 0.0, POLICY)
    rules = state.rules_in_force()
    assert state.status is RobotsStatus.OK and rules is not None
    assert not rules.allowed("courtier", "/no/x") and rules.allowed("courtier", "/yes")
    assert not state.needs_fetch(999.0) and state.needs_fetch(1000.0)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 451])
def test_4xx_allows_everything(status: int) -> None:
    state = RobotsState()
    state.on_response(status, b"", 0.0, POLICY)
    rules = state.rules_in_force()
    assert state.status is RobotsStatus.UNAVAILABLE
    assert rules is not None and rules.allowed("courtier", "/anything")


@pytest.mark.parametrize("status", [429, 500, 502, 503, 599])
def test_5xx_and_429_disallow_and_retry_with_backoff(status: int) -> None:
    state = RobotsState()
    state.on_response(status, b"", 0.0, POLICY)
    assert state.status is RobotsStatus.UNREACHABLE
    assert state.rules_in_force() is None
    assert not state.needs_fetch(59.0) and state.needs_fetch(60.0)
    state.on_response(status, b"", 60.0, POLICY)
    assert state.retry_at == 60.0 + 120.0  # exponential
    steps = []
    for _ in range(6):
        before = state.retry_at
        state.on_unreachable(before, POLICY)  # each retry happens when it is due
        steps.append(state.retry_at - before)
    # 240, 480, then the 600 s cap for ever: the whole sequence, not just a ceiling
    assert steps == [240.0, 480.0, 600.0, 600.0, 600.0, 600.0]
    assert state.failures == 8 and state.status is RobotsStatus.UNREACHABLE


def test_network_error_keeps_obeying_the_last_good_copy() -> None:
    state = RobotsState()
    state.on_response(200, BODY, 0.0, POLICY)
    state.on_unreachable(2000.0, POLICY)
    rules = state.rules_in_force()
    assert rules is not None and not rules.allowed("courtier", "/no")
    assert rules.allowed("courtier", "/yes")


def test_redirects_are_followed_up_to_five_then_unavailable() -> None:
    state = RobotsState()
    for hop in range(5):
        target = state.on_response(301, b"", 0.0, POLICY, location=f"http://a.test/r{hop}")
        assert target == f"http://a.test/r{hop}" and state.fetch_url == target
        assert state.needs_fetch(0.0)
    assert state.on_response(301, b"", 0.0, POLICY, location="http://a.test/r6") is None
    assert state.status is RobotsStatus.UNAVAILABLE and state.fetch_url is None


def test_redirect_then_200_applies_to_the_original_host() -> None:
    state = RobotsState()
    state.on_response(302, b"", 0.0, POLICY, location="http://b.test/robots.txt")
    state.on_response(200, BODY, 1.0, POLICY)
    assert state.status is RobotsStatus.OK and state.fetch_url is None


def test_restore_uses_only_a_fresh_copy_as_current() -> None:
    fresh, stale = RobotsState(), RobotsState()
    fresh.restore(BODY, 200, fetched_at=0.0, expires_at=1000.0, now=10.0)
    stale.restore(BODY, 200, fetched_at=0.0, expires_at=1000.0, now=5000.0)
    assert fresh.status is RobotsStatus.OK and not fresh.needs_fetch(10.0)
    assert stale.status is RobotsStatus.UNKNOWN and stale.needs_fetch(5000.0)
    assert stale.last_good is not None  # still there if the refetch finds it unreachable


def test_retry_after_on_robots_503_delays_the_retry() -> None:
    state = RobotsState()
    state.on_response(503, b"", 0.0, POLICY, retry_at=900.0)
    assert not state.needs_fetch(899.0) and state.needs_fetch(900.0)
    other = RobotsState()
    other.on_response(503, b"", 0.0, POLICY, retry_at=10.0)  # earlier than the back-off
    assert other.retry_at == 60.0


def test_restore_after_an_unreachable_status_keeps_the_last_good_copy() -> None:
    state = RobotsState()
    state.restore(BODY, 503, fetched_at=0.0, expires_at=1000.0, now=10.0)
    assert state.status is RobotsStatus.UNKNOWN and state.needs_fetch(10.0)
    state.on_unreachable(10.0, POLICY)  # still down after the restart
    rules = state.rules_in_force()
    assert rules is not None and not rules.allowed("courtier", "/no")


def test_a_failure_keeps_its_message_and_when_the_run_of_failures_began() -> None:
    """What ``courtier url`` shows of an unreachable robots.txt: the last failure's kind
    and message, and the start of the run of failures (not moved by later ones), all
    cleared by an answer. Seen red with ``failing_since`` set at every failure (100.0
    read 160.0) and with ``_settle`` not clearing the message (kept after the 200)."""
    state = RobotsState()
    state.on_unreachable(100.0, POLICY, "tls_unknown_issuer",
                         "TLS certificate issuer not trusted; add --ca-file")
    state.on_response(503, b"", 160.0, POLICY)
    assert (state.last_error, state.last_error_detail, state.failing_since) == (
        "http_503", "robots.txt answered HTTP 503", 100.0)
    state.on_response(200, BODY, 400.0, POLICY)
    assert (state.last_error, state.last_error_detail, state.failing_since) == (None, None, 0.0)
    state.on_unreachable(500.0, POLICY, "dns", "no such name")
    assert (state.last_error, state.last_error_detail, state.failing_since) == (
        "dns", "no such name", 500.0)
