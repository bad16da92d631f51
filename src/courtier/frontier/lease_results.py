"""The frontier's side of a lease that ends: a fetch's result (a page or robots.txt),
a lease given back unstarted or deferred, a URL whose fetch was not kept.

Each frees the lease's slots (the host's, a robots.txt redirect target's, the address
group's) and wakes the hosts that waited on them; a result also adapts the host's delay,
backs off on trouble and sets the earliest next start. Split out of ``scheduler.py``
(the grant path); :class:`~courtier.frontier.scheduler.Frontier` inherits these
methods, and the state they use is declared here for them.
"""

from __future__ import annotations

import random

from courtier.clock import Clock
from courtier.frontier.host import HostState, IpState
from courtier.frontier.lease import FetchFeedback, Lease, LeaseKind
from courtier.politeness.delays import DelayPolicy
from courtier.politeness.robots import RobotsTxt
from courtier.politeness.robots_state import RobotsPolicy
from courtier.records import DueUrl


class FrontierLeaseResults:
    """The part of :class:`~courtier.frontier.scheduler.Frontier` that takes leases back."""

    clock: Clock
    delay_policy: DelayPolicy
    robots_policy: RobotsPolicy
    max_in_flight: int
    rng: random.Random
    hosts: dict[str, HostState]
    ips: dict[str, IpState]
    _released: list[tuple[DueUrl, float]]
    _queued: int
    _in_flight: int

    def delay_for(self, host: HostState) -> float:
        raise NotImplementedError  # the frontier's

    def base_delay_for(self, host: HostState) -> float:
        raise NotImplementedError  # the frontier's

    def _max_in_flight(self, host: HostState) -> int:
        raise NotImplementedError  # the frontier's

    def _reschedule(self, host: HostState) -> None:
        raise NotImplementedError  # the frontier's

    def release_url(self, due: DueUrl | None, at: float) -> None:
        """Hand one URL back to the store, due again at ``at`` (its fetch was not kept)."""
        if due is not None:
            self._released.append((due, at))

    def finish_page(self, lease: Lease, feedback: FetchFeedback) -> None:
        """A page fetch ended: free its slot, adapt the delay, back off on trouble."""
        host = self._release_slot(lease, feedback.ip)
        status = feedback.status
        now = self.clock.now()
        timing = host.timing
        if status in (429, 503):  # "overloaded": lower the rate for longer than the back-off
            timing.throttle(self.delay_for(host), self.delay_policy)
        if status is None or status == 429 or status >= 500:
            timing.record_failure(now, self.delay_policy, self.rng, feedback.retry_at)
        else:
            timing.record_success(feedback.elapsed, self.delay_policy)
            if timing.throttle_delay > 0:  # recover() does nothing otherwise
                timing.recover(self.base_delay_for(host), self.delay_policy)
        self._space_next(host, lease)
        self._reschedule(host)

    def finish_robots(
        self, lease: Lease, status: int | None, body: bytes = b"", location: str | None = None,
        ip: str | None = None, retry_at: float | None = None, parsed: RobotsTxt | None = None,
        error_kind: str | None = None,
    ) -> None:
        """A robots.txt fetch ended (status None = network error, ``error_kind`` its
        FetchError kind: the host's robots state keeps it); ``parsed``: its body already
        parsed off the loop."""
        host = self._release_slot(lease, ip)
        host.robots_in_flight = False
        now = self.clock.now()
        if status in (429, 503):  # overloaded, even for robots.txt: lower the rate too
            host.timing.throttle(self.delay_for(host), self.delay_policy)
        if status is None:
            host.robots.on_unreachable(now, self.robots_policy, error_kind or "error")
        else:
            host.robots.on_response(status, body, now, self.robots_policy, location, retry_at,
                                    parsed)
        self._space_next(host, lease)
        self._reschedule(host)

    def _release_slot(self, lease: Lease, ip: str | None = None) -> HostState:
        host = self.hosts[lease.host_key]
        host.in_flight -= 1
        self._in_flight -= 1
        if lease.also_host is not None and lease.also_host in self.hosts:
            other = self.hosts[lease.also_host]
            other.in_flight -= 1
            if self._max_in_flight(other) == 1:
                other.next_allowed_at = max(other.next_allowed_at,
                                            self.clock.now() + self.delay_for(other))
            self._reschedule(other)
        if host.waiters:
            waiting, host.waiters = host.waiters, set()
            for key in waiting:
                if key in self.hosts and key != host.host_key:
                    self._reschedule(self.hosts[key])
        if lease.ip is not None:
            group = self.ips[lease.ip]
            group.in_flight -= 1
            waiting, group.waiting = group.waiting, set()
            for key in waiting:
                peer = self.hosts.get(key)
                if peer is not None and key != host.host_key:
                    self._reschedule(peer)
        if ip is not None and ip != host.ip:
            host.ip = ip
            self.ips.setdefault(ip, IpState())
        return host

    def _space_next(self, host: HostState, lease: Lease) -> None:
        """Set the earliest next start from the delay in force *after* this response
        (a new Crawl-delay or a slower host applies to the very next request)."""
        delay = self.delay_for(host)
        if lease.delay > delay:
            delay = lease.delay
        # With one fetch at a time the server saw the request start somewhere between
        # our lease and this moment (connection set-up delays it by an unknown amount),
        # so the gap is counted from the end of the fetch: the next start is then at
        # least ``delay`` after the previous one as the server measures it.
        cap = host.policy.max_in_flight or self.max_in_flight  # _max_in_flight(host) == 1:
        at = (self.clock.now() if cap <= 1 else lease.issued_at) + delay
        if at > host.next_allowed_at:
            host.next_allowed_at = at

    def return_lease(self, lease: Lease) -> None:
        """Give an unstarted or abandoned lease back (shutdown): its URL is released."""
        host = self._release_slot(lease)
        if lease.kind is LeaseKind.ROBOTS:
            host.robots_in_flight = False
        elif lease.due is not None:
            self._released.append((lease.due, lease.due.next_fetch_at))
        self._reschedule(host)

    def defer_lease(self, lease: Lease, until: float) -> None:
        """A lease that may not start yet after all (the address is busy on another worker):
        its URL goes back to the host's queue and neither the host nor its address is
        tried again before ``until``."""
        host = self._release_slot(lease)
        if lease.kind is LeaseKind.ROBOTS:
            host.robots_in_flight = False
        elif lease.due is not None:
            host.push(lease.due, self.clock.now())
            self._queued += 1
        host.next_allowed_at = max(host.next_allowed_at, until)
        if lease.ip is not None and lease.ip in self.ips:
            group = self.ips[lease.ip]
            group.next_allowed_at = max(group.next_allowed_at, until)
        self._reschedule(host)
