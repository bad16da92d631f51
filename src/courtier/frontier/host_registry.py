"""The frontier's host registry: hosts enter with their durable state restored, and
what the worker learns about a host from outside (a policy override, a daily page
window saved by an earlier run, an address the SSRF guard refuses) is applied here.

Split out of ``scheduler.py`` (the grant path); :class:`~courtier.frontier.scheduler.
Frontier` inherits these methods, and the state they use is declared here for them.
"""

from __future__ import annotations

from courtier.clock import Clock
from courtier.frontier.host import HostPolicy, HostState, IpState
from courtier.politeness.robots import RobotsTxt
from courtier.records import DAY, HostRecord


class FrontierHostRegistry:
    """The part of :class:`~courtier.frontier.scheduler.Frontier` that adds hosts and
    changes their state from outside."""

    clock: Clock
    hosts: dict[str, HostState]
    ips: dict[str, IpState]

    def delay_for(self, host: HostState) -> float:
        raise NotImplementedError  # the frontier's

    def _reschedule(self, host: HostState) -> None:
        raise NotImplementedError  # the frontier's

    def knows_host(self, host_key: str) -> bool:
        return host_key in self.hosts

    def register_host(self, host_key: str, shard: int, record: HostRecord | None = None,
                      ip: str | None = None, robots: RobotsTxt | None = None) -> None:
        """Create the host's state, restoring its durable part (robots copy, policy, back-off).

        ``ip`` (when already resolved) puts the host in its IP group from the first
        request on, robots.txt included. ``robots`` is the record's robots body
        already parsed off the loop (else it is parsed here).
        """
        if host_key in self.hosts:
            return
        host = HostState(host_key=host_key, shard=shard, loaded=True, ip=ip)
        if ip is not None:
            self.ips.setdefault(ip, IpState())
        if record is not None:
            host.robots.restore(
                record.robots_body,
                record.robots_status,
                record.robots_fetched_at or 0.0,
                record.robots_expires_at or 0.0,
                self.clock.now(),
                robots,
            )
            host.policy = HostPolicy(
                record.policy_delay, record.policy_max_in_flight, record.policy_max_pages,
                record.blocked,
            )
            host.timing.backoff_until = record.backoff_until or 0.0
            # We may have fetched from this host moments ago (a restart after a crash or
            # a shard takeover); its last start time is unknown, so wait one delay.
            host.next_allowed_at = self.clock.now() + self.delay_for(host)
        self.hosts[host_key] = host

    def restore_day_pages(self, host_key: str, day_start: float, pages: int) -> None:
        """Continue a host's daily page window saved by an earlier run (max-pages-per-day
        survives a restart); a window older than 24 h is ignored."""
        host = self.hosts.get(host_key)
        if host is not None and 0 <= self.clock.now() - day_start < DAY:
            host.day_start, host.day_pages = day_start, max(0, pages)
            self._reschedule(host)

    def set_policy(self, host_key: str, policy: HostPolicy) -> None:
        """Apply a policy override at once (the next lease already obeys it)."""
        host = self.hosts.get(host_key)
        if host is None:
            return
        host.policy = policy
        self._reschedule(host)

    def block_address(self, host_key: str) -> None:
        """The host's address is refused by the SSRF guard: deny its URLs (outcome BLOCKED)
        instead of retrying them; the host is re-checked when its state is next created."""
        host = self.hosts.get(host_key)
        if host is not None:
            host.address_blocked = True
            self._reschedule(host)
