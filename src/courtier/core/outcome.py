"""Per-URL results as values (never exceptions)."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    """How one fetch attempt of a URL ended.

    The outcome decides what the commit does with the URL row and which event
    goes to the outbox.
    """

    OK = "ok"                      # 2xx, archived (and parsed if HTML)
    NOT_MODIFIED = "not_modified"  # 304 on a conditional GET
    REDIRECT = "redirect"          # 3xx with a Location; the target is a new URL
    GONE = "gone"                  # 404 / 410
    HTTP_ERROR = "http_error"      # other 4xx: final for this cycle
    RETRY = "retry"                # 429, 5xx, network error, timeout: try again later
    ROBOTS_DENIED = "robots_denied"  # robots.txt disallows it; not fetched
    BLOCKED = "blocked"            # SSRF guard or policy refused it; not fetched
    ERROR = "error"                # gave up after repeated failures
    NOT_HTML = "not_html"          # 2xx of a type not asked for: body not read, not archived


#: outcomes that end a URL's fetch cycle (schedule the next recrawl)
FINAL_OUTCOMES = frozenset(
    {Outcome.OK, Outcome.NOT_MODIFIED, Outcome.REDIRECT, Outcome.GONE,
     Outcome.HTTP_ERROR, Outcome.ROBOTS_DENIED, Outcome.BLOCKED, Outcome.ERROR,
     Outcome.NOT_HTML}
)
