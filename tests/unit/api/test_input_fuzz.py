"""Any JSON value given to the API's input checks is accepted or refused with
ApiInputError (answered 400), never another exception (answered 500)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from courtier.api import browser, routes, views

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=4),
    max_leaves=20,
)
policy_like = st.dictionaries(
    st.sampled_from(["delay", "max_in_flight", "max_pages", "blocked"]),
    st.none() | st.booleans() | st.integers() | st.floats() | st.integers(2**60, 2**70)
    | st.text(max_size=5),
)


def _accepted_or_400(check: Any, value: Any) -> None:
    with contextlib.suppress(views.ApiInputError):
        check(value)


@settings(max_examples=300, deadline=None)
@given(st.one_of(json_values, policy_like))
def test_policy_parsing_never_fails_otherwise(value: Any) -> None:
    _accepted_or_400(views.parse_policy, value)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_body_parsing_never_fails_otherwise(value: Any) -> None:
    _accepted_or_400(routes.parse_json_body, json.dumps(value))
    _accepted_or_400(views.parse_seed_priority, value)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_header_checks_never_raise(host: str, origin: str) -> None:
    allowed = frozenset({"crawler.lan"})
    browser.host_refusal(host, allowed, False)
    browser.origin_refusal(origin, host, allowed)
    browser.content_type_refusal("POST", origin, True)


def test_header_check_examples() -> None:
    none: frozenset[str] = frozenset()
    assert browser.host_refusal("127.0.0.1:8790", none, False) is None
    assert browser.host_refusal("[::1]:8790", none, False) is None
    assert browser.host_refusal("localhost.", none, False) is None
    assert browser.host_refusal("rebind.example:8790", none, False) is not None
    assert browser.host_refusal("::1", none, False) is not None  # unbracketed: malformed
    assert browser.origin_refusal("http://127.0.0.1:8790", "127.0.0.1:8790", none) is None
    assert browser.origin_refusal("http://localhost", "localhost:80", none) is None
    assert browser.origin_refusal("http://127.0.0.1:8791", "127.0.0.1:8790", none) is not None
    assert browser.content_type_refusal("DELETE", None, False) is None
    assert browser.content_type_refusal("DELETE", "text/plain", True) is not None
    assert browser.content_type_refusal("GET", "text/plain", True) is None
