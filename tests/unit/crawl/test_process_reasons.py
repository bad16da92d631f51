"""A reason for every failure (issue 36): the processor writes the FetchError kind, or
the robots.txt reason of a given-up host, into the URL's commit and its event."""

from __future__ import annotations

import pytest

from courtier.core.errors import (
    BlockedAddressError,
    ConnectTimeout,
    DNSError,
    FetchError,
    RefusedError,
    ResetError,
    TLSExpired,
    TLSHandshakeError,
    TLSUnknownIssuer,
    TLSWrongName,
)
from courtier.core.outcome import Outcome
from tests.unit.crawl.test_process_hostile import make_processor, page_lease


@pytest.mark.parametrize(("exc", "kind"), [
    (DNSError("x"), "dns"), (RefusedError("x"), "refused"), (ResetError("x"), "reset"),
    (ConnectTimeout("x"), "connect_timeout"), (TLSExpired("x"), "tls_expired"),
    (TLSWrongName("x"), "tls_wrong_name"), (TLSUnknownIssuer("x"), "tls_unknown_issuer"),
    (TLSHandshakeError("x"), "tls_handshake"), (BlockedAddressError("x"), "blocked"),
])
def test_each_failure_class_reaches_error_kind(exc: FetchError, kind: str) -> None:
    commit = make_processor().failed(page_lease(), exc, 1000.0)
    assert commit.error_kind == kind
    assert commit.event["error_kind"] == kind
    expected = Outcome.BLOCKED if kind == "blocked" else Outcome.RETRY
    assert commit.outcome is expected


def test_a_url_given_up_on_its_robots_txt_says_why() -> None:
    lease = page_lease()
    assert lease.due is not None
    commit = make_processor().denied(lease.due, "robots_unreachable:dns", None, 1, 1000.0)
    assert commit.outcome is Outcome.ERROR
    assert commit.error_kind == "robots_unreachable:dns"
    assert commit.event["error_kind"] == "robots_unreachable:dns"


@pytest.mark.parametrize(("reason", "outcome", "kind"), [
    ("robots", Outcome.ROBOTS_DENIED, None),
    ("blocked", Outcome.BLOCKED, "policy_blocked"),
    ("blocked_address", Outcome.BLOCKED, "blocked"),
    ("robots_unreachable", Outcome.ERROR, "robots_unreachable"),
])
def test_denials_say_why(reason: str, outcome: Outcome, kind: str | None) -> None:
    lease = page_lease()
    assert lease.due is not None
    commit = make_processor().denied(lease.due, reason, None, 1, 1000.0)
    assert (commit.outcome, commit.error_kind) == (outcome, kind)
