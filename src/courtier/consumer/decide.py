"""Which outbox events change a search index, and how (pure: no I/O).

Every event of the feed (``docs/events.md``) is one of:

* **read** — an HTML page archived whole: read its record, index its title and text.
  ``ok`` fetches and re-parses of ``text/html`` or ``application/xhtml+xml``, not cut
  short (``truncated`` null), not ``noindex``, with a response record (``warc`` set,
  ``revisit`` false).
* **reuse** — the page's bytes are not in its own record but its payload digest names
  them: an ``ok`` HTML page archived as a revisit (the same payload was archived under
  another URL), or a ``not_modified`` answer (304: unchanged since the last fetch).
  The index copies the text it already holds for that digest (or keeps the URL's own).
* **remove** — the URL no longer names a page to find: ``gone`` (404/410), ``redirect``
  (its target gets its own event), or an ``ok`` page that says ``noindex``.
* **skip** — nothing to change: other media types, bodies cut short, failures that may
  pass (``retry``, ``http_error``, ``error``, ``robots_denied``, ``blocked``): the
  index keeps what it had for the URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = ["HTML_TYPES", "Decision", "decide"]

#: media types whose pages are indexed (the crawler parses the same ones)
HTML_TYPES: Final = frozenset({"text/html", "application/xhtml+xml"})
#: outcomes after which the URL names no page any more
_REMOVING: Final = frozenset({"gone", "redirect"})

Action = Literal["read", "reuse", "remove", "skip"]


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with one event, and why (the reason is counted in the summary)."""

    action: Action
    reason: str


def decide(event: dict[str, Any]) -> Decision:
    """The decision for one event as the feed serves it (``{"id", "url_key", "version",
    "payload": {...}}``); see the module docstring for the rules."""
    payload: dict[str, Any] = event.get("payload") or {}
    if payload.get("kind") not in ("fetch", "reparse"):
        return Decision("skip", "unknown kind")
    outcome = payload.get("outcome")
    if outcome in _REMOVING:
        return Decision("remove", str(outcome))
    if outcome == "not_modified":
        return Decision("reuse", "not modified")
    if outcome != "ok":
        return Decision("skip", str(outcome))
    if payload.get("mime") not in HTML_TYPES:
        return Decision("skip", "not HTML")
    if payload.get("truncated") is not None:
        return Decision("skip", "cut short")
    robots = payload.get("robots") or {}
    if robots.get("noindex"):
        return Decision("remove", "noindex")
    warc = payload.get("warc")
    if not warc:
        return Decision("skip", "not archived")
    if warc.get("revisit"):
        return Decision("reuse", "same payload as another URL")
    return Decision("read", "page")
