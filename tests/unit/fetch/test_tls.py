"""ResumingContext's session store: one session per server name, bounded."""

from __future__ import annotations

import ssl
from typing import cast

import pytest

from courtier.fetch import tls
from courtier.fetch.tls import client_context


def session(n: int) -> ssl.SSLSession:
    return cast(ssl.SSLSession, object())


def test_the_last_session_of_a_name_is_the_one_offered() -> None:
    context = client_context()
    first, second = session(1), session(2)
    context.remember("a.test", first)
    context.remember("a.test", second)
    context.remember("b.test", None)  # nothing to keep
    assert context.session_for("a.test") is second
    assert context.session_for("b.test") is None
    assert context.session_for(None) is None


def test_the_least_recently_remembered_names_are_dropped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen red with the bound taken out (every name kept)."""
    monkeypatch.setattr(tls, "SESSIONS_KEPT", 2)
    context = client_context()
    kept = {name: session(n) for n, name in enumerate(("a", "b", "c"))}
    context.remember("a", kept["a"])
    context.remember("b", kept["b"])
    context.remember("a", kept["a"])  # a is now the most recent
    context.remember("c", kept["c"])
    context.remember("d", session(4))
    assert context.session_for("a") is None and context.session_for("b") is None
    assert context.session_for("c") is kept["c"]
