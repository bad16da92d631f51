"""Pure text of the progress display: what a lingering crawl waits for, the recent rate.

No I/O and no clock of its own: every function takes ``now``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI imports this module for every command: keep it light
    from courtier.frontier.host import HostState

RATE_WINDOW = 10.0  # seconds of history behind the "recent rate"


def waiting_text(hosts: Iterable[HostState], next_retry_at: float | None, now: float) -> str:
    """E.g. ``"waiting: 12 hosts (robots.txt unreachable: 5 [dns 3, http_503 2], back-off
    429/5xx: 7), next retry in 40 s"``: :func:`waited_for_text`, then when the next retry
    is due; empty when nothing waits."""
    return waiting_line(waited_for_text(hosts, now), next_retry_at, now)


def waiting_line(waited_for: str, next_retry_at: float | None, now: float) -> str:
    """The waiting text of :func:`waited_for_text`'s ``waited_for`` and the next retry."""
    parts = [waited_for] if waited_for else []
    if next_retry_at is not None:
        parts.append(f"next retry in {max(0.0, next_retry_at - now):.0f} s")
    return "waiting: " + ", ".join(parts) if parts else ""


def waited_for_text(hosts: Iterable[HostState], now: float) -> str:
    """The hosts a lingering crawl waits for, e.g. ``"12 hosts (robots.txt unreachable: 5
    [dns 3, http_503 2], back-off 429/5xx: 7)"``: the robots.txt reasons are the hosts'
    last errors (``RobotsState.last_error``), most frequent first; empty when no host
    waits (only URLs retrying after their own failures)."""
    from courtier.politeness.robots_state import RobotsStatus  # loaded by the crawl already

    robots = backoff = 0
    why: dict[str, int] = {}
    for host in hosts:
        if host.address_blocked:
            continue  # refused by the network guard: its URLs end "blocked", no retry
        if host.robots.status is RobotsStatus.UNREACHABLE:
            robots += 1
            reason = host.robots.last_error or "error"
            why[reason] = why.get(reason, 0) + 1
        elif host.timing.backoff_until > now:
            backoff += 1
    kinds = " [" + ", ".join(f"{k} {n}" for k, n in sorted(
        why.items(), key=lambda item: (-item[1], item[0]))) + "]" if why else ""
    reasons = [f"{label}: {n}{extra}" for label, n, extra in
               (("robots.txt unreachable", robots, kinds), ("back-off 429/5xx", backoff, ""))
               if n]
    hosts_waiting = robots + backoff
    plural = "" if hosts_waiting == 1 else "s"
    return f"{hosts_waiting} host{plural} ({', '.join(reasons)})" if hosts_waiting else ""


def unfinished_urls_text(never_fetched: int, retrying: int) -> str:
    """E.g. ``"3 unfinished URLs (1 never fetched, 2 retrying)"``; empty for none."""
    total = never_fetched + retrying
    if not total:
        return ""
    kinds = ", ".join(f"{n} {label}" for n, label in
                      ((never_fetched, "never fetched"), (retrying, "retrying")) if n)
    return f"{total} unfinished URL{'' if total == 1 else 's'} ({kinds})"


class RecentRate:
    """Pages per second over the last :data:`RATE_WINDOW` seconds (not since the start,
    which decays toward zero while a crawl lingers)."""

    def __init__(self, window: float = RATE_WINDOW) -> None:
        self.window = window
        self._samples: deque[tuple[float, int]] = deque()

    def update(self, now: float, fetched: int) -> float:
        samples = self._samples
        samples.append((now, fetched))
        while len(samples) > 2 and samples[1][0] <= now - self.window:
            samples.popleft()
        first_at, first = samples[0]
        span = now - first_at
        return (fetched - first) / span if span > 0 else 0.0
