"""An independent observer of simulated traffic: counts politeness violations.

It sees only what a site owner would see (requests with their start and end
times, and its own responses) plus the rules the crawler promised to keep,
and re-derives from those alone whether each request was allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from courtier.politeness.delays import parse_retry_after
from courtier.politeness.robots import RobotsTxt

EPSILON = 1e-6


@dataclass(frozen=True, slots=True)
class SimRequest:
    host: str
    ip: str
    path: str
    start: float
    end: float
    status: int


@dataclass(slots=True)
class _HostView:
    in_flight: int = 0
    last_start: float | None = None
    robots: RobotsTxt | None = None      # last good copy served
    robots_allow_all: bool = False
    robots_unreachable: bool = False
    robots_seen: bool = False
    blocked_until: float = 0.0


@dataclass(slots=True)
class Observer:
    """Checks every simulated request against the promises of DESIGN.md §1."""

    agent: str
    delay: float
    max_in_flight: int
    max_in_flight_per_ip: int
    requests: list[SimRequest] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    _hosts: dict[str, _HostView] = field(default_factory=dict)
    _ip_in_flight: dict[str, int] = field(default_factory=dict)

    def on_start(self, host: str, ip: str, path: str, now: float) -> None:
        view = self._hosts.setdefault(host, _HostView())
        problems = []
        if view.in_flight + 1 > self.max_in_flight:
            problems.append(f"{view.in_flight + 1} requests in flight")
        ip_count = self._ip_in_flight.get(ip, 0) + 1
        if self.max_in_flight_per_ip and ip_count > self.max_in_flight_per_ip:
            problems.append(f"{ip_count} requests in flight to IP {ip}")
        if view.last_start is not None:
            need = self.delay
            if view.robots is not None:
                need = max(need, view.robots.crawl_delay(self.agent) or 0.0)
            gap = now - view.last_start
            if gap + EPSILON < need:
                problems.append(f"gap {gap:.3f}s < delay {need:.3f}s")
        if now + EPSILON < view.blocked_until:
            problems.append(f"request during back-off (until {view.blocked_until:.1f})")
        if path != "/robots.txt":
            if not view.robots_seen:
                problems.append("page before robots.txt")
            elif view.robots_unreachable and view.robots is None:
                problems.append("page while robots.txt unreachable")
            elif (view.robots is not None and not view.robots_allow_all
                  and not view.robots.allowed(self.agent, path)):
                problems.append("disallowed by robots.txt")
        for problem in problems:
            self.violations.append(f"{now:.3f} {host}{path}: {problem}")
        view.in_flight += 1
        view.last_start = now
        self._ip_in_flight[ip] = ip_count

    def on_end(self, host: str, ip: str, path: str, start: float, now: float, status: int,
               body: bytes = b"", retry_after: str | None = None) -> None:
        view = self._hosts[host]
        view.in_flight -= 1
        self._ip_in_flight[ip] -= 1
        self.requests.append(SimRequest(host, ip, path, start, now, status))
        if status in (429, 503) and retry_after is not None:
            until = parse_retry_after(retry_after, now)
            if until is not None:
                view.blocked_until = max(view.blocked_until, until)
        if path == "/robots.txt":
            view.robots_seen = True
            if 200 <= status < 300:
                view.robots = RobotsTxt.parse(body)
                view.robots_allow_all = False
                view.robots_unreachable = False
            elif 400 <= status < 500 and status != 429:
                view.robots_allow_all = True
                view.robots_unreachable = False
                view.robots = None
            else:
                view.robots_unreachable = True
                view.robots_allow_all = False
