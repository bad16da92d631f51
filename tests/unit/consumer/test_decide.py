"""Which events the consumer indexes, copies, removes or skips (consumer/decide.py)."""

from __future__ import annotations

from typing import Any

import pytest

from courtier.consumer.decide import decide


def event(**payload: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kind": "fetch", "outcome": "ok", "mime": "text/html", "truncated": None,
        "robots": {"noindex": False, "nofollow": False, "meta": None, "header": None},
        "warc": {"file": "a.warc.gz", "offset": 0, "length": 10, "revisit": False},
        "url": "http://a.test/", "payload_digest": "sha256:X",
    }
    base.update(payload)
    return {"id": 1, "url_key": "00" * 16, "version": 1, "payload": base}


def test_an_archived_html_page_is_read() -> None:
    assert decide(event()).action == "read"
    assert decide(event(kind="reparse")).action == "read"
    assert decide(event(mime="application/xhtml+xml")).action == "read"


@pytest.mark.parametrize(("payload", "reason"), [
    ({"mime": "application/pdf"}, "not HTML"),
    ({"mime": None}, "not HTML"),
    ({"truncated": "length"}, "cut short"),
    ({"warc": None}, "not archived"),
    ({"outcome": "retry"}, "retry"),
    ({"outcome": "http_error"}, "http_error"),
    ({"outcome": "robots_denied", "warc": None, "mime": None}, "robots_denied"),
    ({"outcome": "blocked"}, "blocked"),
    ({"outcome": "error"}, "error"),
    ({"kind": "something-new"}, "unknown kind"),
])
def test_what_is_skipped_and_why(payload: dict[str, Any], reason: str) -> None:
    decision = decide(event(**payload))
    assert (decision.action, decision.reason) == ("skip", reason)


@pytest.mark.parametrize("payload", [
    {"outcome": "gone", "mime": "text/plain"},
    {"outcome": "redirect", "mime": "text/plain"},
    {"robots": {"noindex": True, "nofollow": False, "meta": "noindex", "header": None}},
])
def test_pages_that_are_no_longer_pages_are_removed(payload: dict[str, Any]) -> None:
    assert decide(event(**payload)).action == "remove"


def test_revisits_and_304s_reuse_the_text_of_their_payload() -> None:
    revisit = {"file": "a.warc.gz", "offset": 5, "length": 9, "revisit": True}
    assert decide(event(warc=revisit)).action == "reuse"
    assert decide(event(outcome="not_modified", status=304, mime=None,
                        warc=revisit)).action == "reuse"
    # a revisit of something that is not HTML stays skipped
    assert decide(event(warc=revisit, mime="image/png")).action == "skip"
