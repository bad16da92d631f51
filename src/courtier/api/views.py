"""Pure helpers of the admin API: input validation and JSON views of crawl state.

Nothing here does I/O. Every function either returns plain JSON-able data
(dicts, lists, str, int, float, bool, None) or raises :class:`ApiInputError`
(wrong input, answered 400) — the server maps both without ever answering 500
for bad input.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from courtier.api.jsonable import json_safe
from courtier.core.errors import CourtierError, InvalidURL
from courtier.core.shard_cursor import ShardCursor
from courtier.core.urls import canonicalize, host_key_of
from courtier.frontier.host import HostPolicy, HostState
from courtier.frontier.scheduler import Frontier
from courtier.politeness.robots import RobotsTxt
from courtier.politeness.robots_state import RobotsStatus
from courtier.store.base import Event, HostRecord, UrlState
from courtier.store.event_counts import status_class_of

#: largest per-host delay an API caller may set (one day)
MAX_POLICY_DELAY = 86_400.0
#: largest per-host in-flight cap an API caller may set
MAX_POLICY_IN_FLIGHT = 64
#: largest daily page cap an API caller may set (stored as a 64-bit integer)
MAX_POLICY_PAGES = 1_000_000_000
POLICY_FIELDS = ("delay", "max_in_flight", "max_pages", "blocked")
#: seed priorities an API caller may give; below the overdue boost (100), so the
#: minimum-refresh guarantee still outranks every seed
MIN_SEED_PRIORITY, MAX_SEED_PRIORITY = 0, 99


class ApiInputError(CourtierError):
    """The caller's input is wrong (answered 400 with the message)."""


class ApiNotFound(CourtierError):
    """The thing asked about is not known (answered 404 with the message)."""


# ---- domains and policies -----------------------------------------------------------------


def host_keys_for(domain: str) -> list[str]:
    """The host keys a ``{domain}`` path segment names: its http and https host keys.

    ``domain`` is an authority: a host name or IP, optionally with ``:port``
    (``example.com``, ``h00.courtier.test:8080``). Politeness is per host key
    (scheme + authority), so a domain names at most two of them.
    Raises :class:`ApiInputError` when it is not a valid authority.
    """
    text = domain.strip()
    if not text or len(text) > 300 or any(c in text for c in "/?#@\\ \t"):
        raise ApiInputError(f"not a host name (host or host:port expected): {domain!r}")
    keys: list[str] = []
    for scheme in ("http", "https"):
        try:
            key = canonicalize(f"{scheme}://{text}/").host_key
        except InvalidURL as exc:
            raise ApiInputError(f"not a host name: {domain!r} ({exc})") from None
        if key not in keys:
            keys.append(key)
    return keys


def parse_policy(body: Any) -> HostPolicy:
    """Validate a policy JSON object; missing fields mean "crawl default".

    ``delay``: number in [0, 86400] or null; ``max_in_flight``: integer in
    [1, 64] or null; ``max_pages``: integer in [0, 10⁹] or null; ``blocked``: boolean
    (default false). Unknown fields are an error, so a typo never passes silently.
    """
    if not isinstance(body, dict):
        raise ApiInputError("policy must be a JSON object")
    unknown = sorted(set(body) - set(POLICY_FIELDS))
    if unknown:
        raise ApiInputError(f"unknown policy field(s): {', '.join(unknown)}")
    delay = body.get("delay")
    if delay is not None:
        if isinstance(delay, bool) or not isinstance(delay, int | float):
            raise ApiInputError("delay must be a number of seconds or null")
        finite = isinstance(delay, int) or math.isfinite(delay)  # a huge int is no float
        if not finite or not 0 <= delay <= MAX_POLICY_DELAY:
            raise ApiInputError(f"delay must be between 0 and {MAX_POLICY_DELAY:g} seconds")
    in_flight = _optional_int(body, "max_in_flight", 1, MAX_POLICY_IN_FLIGHT)
    max_pages = _optional_int(body, "max_pages", 0, MAX_POLICY_PAGES)
    blocked = body.get("blocked", False)
    if not isinstance(blocked, bool):
        raise ApiInputError("blocked must be true or false")
    return HostPolicy(None if delay is None else float(delay), in_flight, max_pages, blocked)


def _optional_int(body: Mapping[str, Any], name: str, low: int, high: int | None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiInputError(f"{name} must be an integer or null")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ApiInputError(f"{name} must be {bound}")
    return value


def parse_seed_priority(value: Any) -> int | None:
    """A seed ``priority`` field: an integer in [0, 99], or null for the API default."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiInputError("priority must be an integer or null")
    if not MIN_SEED_PRIORITY <= value <= MAX_SEED_PRIORITY:
        raise ApiInputError(
            f"priority must be between {MIN_SEED_PRIORITY} and {MAX_SEED_PRIORITY}")
    return value


def policy_view(policy: HostPolicy) -> dict[str, Any]:
    return {
        "delay": policy.delay,
        "max_in_flight": policy.max_in_flight,
        "max_pages": policy.max_pages,
        "blocked": policy.blocked,
    }


def policy_of(record: HostRecord | None) -> HostPolicy:
    if record is None:
        return HostPolicy()
    return HostPolicy(
        record.policy_delay, record.policy_max_in_flight, record.policy_max_pages, record.blocked
    )


def is_default(policy: HostPolicy) -> bool:
    return policy == HostPolicy()


# ---- URL rows and robots decisions --------------------------------------------------------


def url_row_view(row: Mapping[str, Any]) -> dict[str, Any]:
    """A store URL row as JSON: url_key as hex, the state also by name."""
    out = json_safe({k: v for k, v in row.items() if k != "url_key_hex"})
    state = row.get("state")
    try:
        out["state_name"] = UrlState(int(state)).name.lower() if state is not None else None
    except ValueError:
        out["state_name"] = None
    return dict(out)


def path_of_url(url: str) -> str:
    """Path and query of an absolute URL (what robots.txt rules are matched against)."""
    start = url.find("/", url.find("//") + 2)
    return url[start:] if start >= 0 else "/"


def utc_text(when: float) -> str:
    """POSIX seconds as an ISO 8601 UTC time to the second (``2026-12-06T12:10:00Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def robots_failure_view(kind: str | None, message: str | None, since: float | None,
                        last_at: float | None) -> dict[str, Any] | None:
    """Why a host's robots.txt is unreachable (None when it is not): the failure's kind
    and message, when the run of failures began and the last one, and ``text``, the same
    as one line for an operator."""
    if kind is None:
        return None
    text = f"robots.txt: unreachable ({kind}" + (f": {message}" if message else "") + ")"
    if since:
        text += f" since {utc_text(since)}"
    return {"kind": kind, "message": message, "since": since or None, "last_at": last_at,
            "text": text}


def live_robots_decision(host: HostState, agent: str, url: str) -> dict[str, Any]:
    """What the running frontier's robots state says about ``url`` right now."""
    robots = host.robots
    rules = robots.rules_in_force()
    if rules is None:
        decision = "disallowed" if robots.status is RobotsStatus.UNREACHABLE else "unknown"
        digest = None
    else:
        decision = "allowed" if rules.allowed(agent, path_of_url(url)) else "disallowed"
        digest = rules.digest
    failing = robots.status is RobotsStatus.UNREACHABLE
    return {
        "source": "live",
        "decision": decision,
        "robots_state": str(robots.status),
        "digest": digest,
        "unreachable": robots_failure_view(
            robots.last_error if failing else None, robots.last_error_detail,
            robots.failing_since, None),
    }


def stored_robots_decision(
    record: HostRecord | None, agent: str, url: str, now: float
) -> dict[str, Any]:
    """What the store's robots.txt copy says about ``url`` (no running crawl needed);
    ``unreachable``: why robots.txt is unreachable, when it is (a failure before any
    answer included: TLS, DNS, refused…)."""
    failure = None if record is None else robots_failure_view(
        record.robots_error_kind, record.robots_error, record.robots_error_since,
        record.robots_error_at)
    if record is None or (record.robots_status is None and failure is None):
        return {"source": "none", "decision": "unknown", "robots_state": "unknown",
                "digest": None, "unreachable": None}
    status = record.robots_status if record.robots_status is not None else 0
    # 0: no copy was ever fetched (a failure before any answer), so none has expired
    expired = bool(record.robots_expires_at) and now >= (record.robots_expires_at or 0.0)
    if failure is not None:  # the last good copy, if any, is obeyed meanwhile (RFC 9309)
        state = "unreachable"
        if record.robots_body is not None:
            rules = RobotsTxt.parse(record.robots_body)
            decision = "allowed" if rules.allowed(agent, path_of_url(url)) else "disallowed"
        else:
            decision = "disallowed"
    elif 200 <= status < 300 and record.robots_body is not None:
        rules = RobotsTxt.parse(record.robots_body)
        decision = "allowed" if rules.allowed(agent, path_of_url(url)) else "disallowed"
        state = "ok"
    elif 400 <= status < 500 and status != 429:
        decision, state = "allowed", "unavailable"
    else:
        decision, state = "disallowed", "unreachable"
    return {
        "source": "store",
        "decision": decision,
        "robots_state": state,
        "digest": record.robots_digest,
        "expired": expired,
        "unreachable": failure,
    }


# ---- hosts ---------------------------------------------------------------------------------


def stored_host_view(record: HostRecord, now: float) -> dict[str, Any]:
    """Durable counters and robots state of one host (a ``hosts`` row)."""
    age = now - record.robots_fetched_at if record.robots_fetched_at else None
    return {
        "fetched": record.fetched,
        "errors": record.errors,
        "bytes": record.bytes,
        "ttfb_avg": record.ttfb_sum / record.fetched if record.fetched else None,
        "robots_status": record.robots_status,
        "robots_fetched_at": record.robots_fetched_at,
        "robots_expires_at": record.robots_expires_at,
        "robots_age": age,
        "crawl_delay": record.crawl_delay,
        "backoff_until": record.backoff_until,
        "https_upgrade": record.https_upgrade,
        "robots_unreachable": robots_failure_view(
            record.robots_error_kind, record.robots_error, record.robots_error_since,
            record.robots_error_at),
        "policy": policy_view(policy_of(record)),
    }


def live_host_view(host: HostState, now: float, delay: float) -> dict[str, Any]:
    """The running frontier's state of one host; times also as seconds from now."""
    robots, timing = host.robots, host.timing
    return {
        "queue": len(host.queue),
        "in_flight": host.in_flight,
        "next_allowed_at": host.next_allowed_at,
        "next_allowed_in": max(0.0, host.next_allowed_at - now),
        "backoff_until": timing.backoff_until,
        "backoff_remaining": max(0.0, timing.backoff_until - now),
        "consecutive_failures": timing.failures,
        "adaptive_delay": timing.adaptive_delay,
        "throttle_delay": timing.throttle_delay or None,
        "throttle_events": timing.throttle_events,
        "allowed_rate": 1.0 / delay if delay > 0 else None,
        "delay": delay,
        "pages_issued": host.pages_issued,
        "ip": host.ip,
        "tls_handshakes": host.tls_handshakes,
        "tls_resumed": host.tls_resumed,
        "https_upgrade": host.https_upgrade,
        "robots": {
            "state": str(robots.status),
            "last_status": robots.last_status,
            "fetched_at": robots.fetched_at or None,
            "age": now - robots.fetched_at if robots.fetched_at else None,
            "expires_at": robots.expires_at or None,
            "failures": robots.failures,
            "retry_at": robots.retry_at or None,
            "has_good_copy": robots.last_good is not None,
            "unreachable": robots_failure_view(
                robots.last_error if robots.status is RobotsStatus.UNREACHABLE else None,
                robots.last_error_detail, robots.failing_since, None),
        },
        "policy": policy_view(host.policy),
    }


def politeness_summary(frontier: Frontier, now: float, violations: int) -> dict[str, Any]:
    """Hosts in back-off, robots.txt states and the self-check count of a running frontier."""
    states: Counter[str] = Counter(str(h.robots.status) for h in frontier.hosts.values())
    backing_off = sum(1 for h in frontier.hosts.values() if h.timing.backoff_until > now)
    return {
        "hosts_known": len(frontier.hosts),
        "hosts_active": frontier.active_hosts(),
        "hosts_in_backoff": backing_off,
        "robots_unreachable": states.get("unreachable", 0),
        "robots_states": dict(states),
        "violations": violations,
    }


# ---- event tally (status mix, errors by host) ----------------------------------------------


def is_error(payload: Mapping[str, Any]) -> bool:
    """An event counts as an error: no response, a 4xx/5xx, or a give-up/retry outcome."""
    status = payload.get("status")
    if payload.get("outcome") in ("retry", "error"):
        return True
    return isinstance(status, int) and status >= 400


@dataclass(slots=True)
class EventTally:
    """Running totals over the event outbox, read incrementally with a per-shard cursor
    (``Store.read_events_by_shard``: no outbox sequencer runs for it).

    ``host_errors`` keeps at most ``max_hosts`` hosts (the ones with most
    errors survive a trim), so memory stays bounded on a huge crawl.
    """

    cursor: ShardCursor = field(default_factory=ShardCursor)
    events: int = 0
    status_mix: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    host_errors: Counter[str] = field(default_factory=Counter)
    max_hosts: int = 20_000

    def add(self, events: Iterable[Event]) -> None:
        for event in events:
            self.events += 1
            payload = event.payload
            outcome = str(payload.get("outcome"))
            self.outcomes[outcome] += 1
            if outcome not in ("robots_denied", "blocked"):
                self.status_mix[status_class_of(payload.get("status"))] += 1
            url = payload.get("url")
            if is_error(payload) and isinstance(url, str):
                try:
                    self.host_errors[host_key_of(url)] += 1
                except InvalidURL:
                    continue
        if len(self.host_errors) > self.max_hosts:
            self.host_errors = Counter(dict(self.host_errors.most_common(self.max_hosts // 2)))


def shard_event_view(event: Event) -> dict[str, Any]:
    """:func:`event_view` with the event's place in its shard (the per-shard cursor's)."""
    return {**event_view(event), "shard": event.shard, "shard_pos": event.shard_pos}


def event_view(event: Event) -> dict[str, Any]:
    return {
        "id": event.id,
        "url_key": event.url_key.hex(),
        "version": event.version,
        "created_at": event.created_at,
        "payload": json_safe(event.payload),
    }
