"""What the frontier hands to a fetcher."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from courtier.core.records import DueUrl


class LeaseKind(StrEnum):
    PAGE = "page"
    ROBOTS = "robots"


@dataclass(slots=True)
class Lease:
    """Permission to fetch one URL now.

    A PAGE lease carries the URL row (``due``) with the version it saw and
    the shard owner's ``epoch``; the commit of its result is conditional on
    both. A ROBOTS lease fetches ``url`` for ``host_key``'s robots state and
    carries no row. ``delay`` is the gap in force when it was issued and
    ``robots_digest`` the robots.txt version obeyed (both for the audit trail).
    """

    kind: LeaseKind
    host_key: str
    url: str
    issued_at: float
    epoch: int
    delay: float
    due: DueUrl | None = None
    robots_digest: str | None = None
    ip: str | None = None            # the IP group this lease was counted against
    also_host: str | None = None     # a robots.txt redirect to another host: counted there too


@dataclass(frozen=True, slots=True)
class FetchFeedback:
    """What the frontier needs to know about a finished fetch.

    ``status`` is None for a network error or timeout; ``retry_at`` is the
    absolute time a Retry-After header asked for (already parsed); ``ip`` the
    address connected to, which puts the host in that IP's group.
    """

    status: int | None
    elapsed: float
    retry_at: float | None = None
    ip: str | None = None            # the address the transport connected to
