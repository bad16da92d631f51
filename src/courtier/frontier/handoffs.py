"""The frontier's hand-offs to the worker and its figures: what leaves it other than
leases (denied and released URLs, drained shards, forgotten hosts) and what it reports
(queued URLs, leases out, next wake-up).

Split out of ``scheduler.py`` (the grant path); :class:`~courtier.frontier.scheduler.
Frontier` inherits these methods, and its state is declared here for them.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection

from courtier.clock import Clock
from courtier.frontier.host import HostState
from courtier.frontier.ready import ReadyHosts
from courtier.records import DueUrl

#: (url row, reason, robots digest); reason: "robots", "blocked" (domain policy),
#: "blocked_address" (the SSRF guard refused its address), "robots_unreachable[:KIND]"
Denial = tuple[DueUrl, str, str | None]


def robots_unreachable_kind(last_error: str | None) -> str:
    """The error_kind of a URL given up because its host's robots.txt stayed
    unreachable: ``robots_unreachable:<why>`` (``:dns``, ``:http_503``, ``:tls_expired``…),
    plain ``robots_unreachable`` when the reason is not known."""
    if last_error is None or last_error == "error":
        return "robots_unreachable"
    return f"robots_unreachable:{last_error}"


class FrontierHandoffs:
    """The part of :class:`~courtier.frontier.scheduler.Frontier` off the grant path."""

    clock: Clock
    hosts: dict[str, HostState]
    _waiting: list[tuple[float, int, int, str]]
    _ready: ReadyHosts
    _denied: list[Denial]
    _released: list[tuple[DueUrl, float]]
    _queued: int
    _in_flight: int

    def _reschedule(self, host: HostState) -> None:
        raise NotImplementedError  # the frontier's

    # ---- hand-offs to the worker ------------------------------------------------------------

    def rerank(self) -> None:
        """Re-rank every host's queue: URLs that became overdue while waiting in memory
        move ahead (call every minute or so)."""
        now = self.clock.now()
        for host in self.hosts.values():
            if host.queue:
                host.rerank(now)
                self._reschedule(host)

    def take_denied(self) -> list[Denial]:
        out, self._denied = self._denied, []
        return out

    def take_released(self) -> list[tuple[DueUrl, float]]:
        out, self._released = self._released, []
        return out

    def release_all(self) -> list[tuple[DueUrl, float]]:
        """Drain every queued URL (shutdown or lost shard): they go back to the store."""
        for host in self.hosts.values():
            for due in host.drain():
                self._queued -= 1
                self._released.append((due, due.next_fetch_at))
            host.token += 1
        return self.take_released()

    def drain_shards(self, shards: Collection[int]) -> list[tuple[DueUrl, float]]:
        """Empty the queues of the hosts of ``shards`` (a handover or a lost lease): their
        URLs are returned, due as they were. The hosts stay known, so fetches in flight
        finish against their state; :meth:`forget_shards` drops them afterwards."""
        out: list[tuple[DueUrl, float]] = []
        for host in self.hosts.values():
            if host.shard in shards:
                for due in host.drain():
                    self._queued -= 1
                    out.append((due, due.next_fetch_at))
                host.token += 1
        return out

    def forget_shards(self, shards: Collection[int]) -> list[HostState]:
        """Drop the state of the hosts of ``shards`` that have nothing in flight; return
        them (their politeness clocks are saved for the next owner)."""
        gone = [h for h in self.hosts.values()
                if h.shard in shards and not h.in_flight and not h.robots_in_flight]
        for host in gone:
            del self.hosts[host.host_key]
            for due in host.drain():  # nothing should be queued; never lose a URL
                self._queued -= 1
                self._released.append((due, due.next_fetch_at))
        return gone

    # ---- figures ---------------------------------------------------------------------------

    def next_wake_at(self) -> float | None:
        """Earliest time a queued host becomes ready (None: nothing waits on time)."""
        if len(self._ready):
            return self.clock.now()
        while self._waiting:
            at, _, token, key = self._waiting[0]
            host = self.hosts.get(key)
            if host is not None and host.token == token:
                return at
            heapq.heappop(self._waiting)
        return None

    @property
    def queued(self) -> int:
        return self._queued

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def full_hosts(self, window: int) -> set[str]:
        """Hosts whose in-memory queue holds at least ``window`` URLs (skip them on refill)."""
        return {key for key, host in self.hosts.items() if len(host.queue) >= window}

    def active_hosts(self) -> int:
        return sum(1 for host in self.hosts.values() if host.queue or host.in_flight)

    def forget_idle_hosts(self, keep: int) -> None:
        """Drop state of idle hosts beyond ``keep`` (memory bounded by active hosts).

        Only hosts whose delay and back-off have fully elapsed are dropped, so a
        host that comes back starts from a clean slate without breaking its delay.
        """
        if len(self.hosts) <= keep:
            return
        now = self.clock.now()
        idle = [
            k for k, h in self.hosts.items()
            if not h.queue and not h.in_flight
            and h.next_allowed_at <= now and h.timing.backoff_until <= now
        ]
        for key in idle:
            if len(self.hosts) <= keep:
                break
            del self.hosts[key]
