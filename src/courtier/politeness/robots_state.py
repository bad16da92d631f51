"""The per-host robots.txt state machine (RFC 9309 §2.3.1).

Pure: transitions take ``now`` and a fetch result; nothing here does I/O.

=================  ==========================================================
robots fetch       what the host's URLs get
=================  ==========================================================
2xx                the parsed rules, until ``expires_at`` (≤ 24 h)
3xx                the redirect is followed (up to 5 hops, each a polite fetch)
> 5 hops           "unavailable": allow all (RFC 9309 §2.3.1.2)
4xx (401/403 too)  "unavailable": allow all, until ``expires_at``
5xx, 429, error    "unreachable": disallow all and retry with back-off; the
                   reason is kept (``last_error``: ``http_503``, ``dns``,
                   ``tls_expired``…); the
                   last good copy, if any, keeps being obeyed meanwhile (a
                   2xx whose body was cut short by time or the server, and
                   a header deadline overrun, count as errors)
=================  ==========================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from courtier.politeness.robots import MAX_ROBOTS_BYTES, RobotsTxt

MAX_ROBOTS_REDIRECTS = 5
#: ways a robots.txt body can end early (``FetchResponse.truncated``) that leave it
#: incomplete: cut by time, the low-speed limit or the server, or undecodable. Its
#: missing lines may disallow, so such a copy is never obeyed as the whole file; it
#: counts as unreachable. A body cut at the size cap is parsed (RFC 9309 §2.5 limit).
INCOMPLETE_ROBOTS = frozenset({"time", "slow", "disconnect", "encoding"})


class RobotsStatus(StrEnum):
    UNKNOWN = "unknown"  # never fetched (or expired and refetch pending)
    OK = "ok"  # 2xx parsed
    UNAVAILABLE = "unavailable"  # 4xx or too many redirects: allow all
    UNREACHABLE = "unreachable"  # 5xx, 429, network error: disallow all, retry


@dataclass(frozen=True, slots=True)
class RobotsPolicy:
    expiry: float = 24 * 3600.0  # a good copy is refetched after this (≤ 24 h)
    retry_base: float = 60.0  # first retry after an unreachable robots.txt
    retry_max: float = 6 * 3600.0
    give_up_after: int = 5  # unreachable this many times in a row: end the URLs'
    # cycle (they return at their next recrawl)


@dataclass(slots=True)
class RobotsState:
    """What one host's robots.txt currently says, and when to ask again."""

    status: RobotsStatus = RobotsStatus.UNKNOWN
    rules: RobotsTxt | None = None
    fetched_at: float = 0.0
    expires_at: float = 0.0
    retry_at: float = 0.0
    failures: int = 0
    last_good: RobotsTxt | None = None
    last_good_at: float = 0.0
    redirects: int = 0
    fetch_url: str | None = None  # a redirect target to fetch instead of /robots.txt
    last_status: int | None = None
    #: why the last fetch left it unreachable: a FetchError kind ("dns", "refused",
    #: "tls_unknown_issuer", …), "http_503" for a status, "error" when not told; None
    #: once a fetch succeeds
    last_error: str | None = None
    #: that failure's message (``str`` of the FetchError: for TLS what was wrong with
    #: the certificate), None once a fetch succeeds
    last_error_detail: str | None = None
    #: when the current run of failures began (0: not failing)
    failing_since: float = 0.0

    def needs_fetch(self, now: float) -> bool:
        """True when the next request to this host must be a robots.txt fetch."""
        if self.status is RobotsStatus.UNKNOWN:
            return True
        if self.status is RobotsStatus.UNREACHABLE:
            return now >= self.retry_at
        return now >= self.expires_at

    def given_up(self, policy: RobotsPolicy) -> bool:
        """Unreachable too often with no good copy to fall back on: stop waiting for it."""
        return (
            self.status is RobotsStatus.UNREACHABLE
            and self.last_good is None
            and self.failures >= policy.give_up_after
        )

    def rules_in_force(self) -> RobotsTxt | None:
        """Rules to obey now; None means "disallow everything, wait for a retry"."""
        if self.status is RobotsStatus.OK:
            return self.rules
        if self.status is RobotsStatus.UNAVAILABLE:
            return RobotsTxt.allow_all()
        if self.status is RobotsStatus.UNREACHABLE:
            return self.last_good
        # UNKNOWN after an expiry: the old copy stays valid only until refetched
        return None

    def on_response(
        self,
        status: int,
        body: bytes,
        now: float,
        policy: RobotsPolicy,
        location: str | None = None,
        retry_at: float | None = None,
        parsed: RobotsTxt | None = None,
    ) -> str | None:
        """Apply one robots.txt response. Returns a redirect target to fetch next, or None.

        ``retry_at`` (from a Retry-After header on a 429/503) delays the next attempt
        beyond the usual back-off when it is later. ``parsed`` is ``body`` already
        parsed (off the event loop, ``robots_offload.py``); else it is parsed here."""
        self.last_status = status
        if 200 <= status < 300:
            self.rules = parsed if parsed is not None else RobotsTxt.parse(body[:MAX_ROBOTS_BYTES])
            self.last_good = self.rules
            self.last_good_at = now
            self._settle(RobotsStatus.OK, now, policy)
            return None
        if 300 <= status < 400 and location:
            self.redirects += 1
            if self.redirects <= MAX_ROBOTS_REDIRECTS:
                self.fetch_url = location
                return location
            self._settle(RobotsStatus.UNAVAILABLE, now, policy)
            return None
        if 400 <= status < 500 and status != 429:
            self.rules = None
            self._settle(RobotsStatus.UNAVAILABLE, now, policy)
            return None
        # 5xx, 429, a 3xx without Location, or anything odd: unreachable
        self.on_unreachable(now, policy, f"http_{status}", f"robots.txt answered HTTP {status}")
        if retry_at is not None:
            self.retry_at = max(self.retry_at, retry_at)
        return None

    def on_unreachable(self, now: float, policy: RobotsPolicy, reason: str = "error",
                       detail: str | None = None) -> None:
        """A network error, 5xx or 429: disallow (or keep the last good copy) and retry
        later; ``reason`` (a FetchError kind, ``http_<status>``) is kept in ``last_error``,
        ``detail`` (its message) in ``last_error_detail``."""
        self.last_error = reason
        self.last_error_detail = detail
        if self.failures == 0:
            self.failing_since = now
        self.failures += 1
        self.status = RobotsStatus.UNREACHABLE
        self.redirects = 0
        self.fetch_url = None
        step = min(policy.retry_max, policy.retry_base * 2 ** min(self.failures - 1, 20))
        self.retry_at = now + step

    def restore(
        self,
        body: bytes | None,
        status: int | None,
        fetched_at: float,
        expires_at: float,
        now: float,
        parsed: RobotsTxt | None = None,
    ) -> None:
        """Reload a copy saved in the store; an expired one only serves as the last good copy.

        ``parsed`` is ``body`` already parsed (off the event loop); else it is parsed here."""
        if status is None:
            return
        if body is not None and not 200 <= status < 300:
            # unreachable (or unavailable) last time: the stored body is the last good copy
            self.last_good = parsed if parsed is not None else RobotsTxt.parse(body)
            self.last_good_at = fetched_at
            return
        if body is not None and 200 <= status < 300:
            rules = parsed if parsed is not None else RobotsTxt.parse(body)
            self.last_good = rules
            self.last_good_at = fetched_at
            if now < expires_at:
                self.rules = rules
                self.status = RobotsStatus.OK
                self.fetched_at = fetched_at
                self.expires_at = expires_at
        elif 400 <= status < 500 and status != 429 and now < expires_at:
            self.status = RobotsStatus.UNAVAILABLE
            self.fetched_at = fetched_at
            self.expires_at = expires_at

    def _settle(self, status: RobotsStatus, now: float, policy: RobotsPolicy) -> None:
        self.status = status
        self.fetched_at = now
        self.expires_at = now + policy.expiry
        self.last_error = None
        self.last_error_detail = None
        self.failing_since = 0.0
        self.failures = 0
        self.redirects = 0
        self.fetch_url = None
