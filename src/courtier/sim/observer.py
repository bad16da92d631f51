"""An independent observer of simulated traffic: counts politeness violations.

It sees only what a site owner would see (requests with their start and end
times, and its own responses) plus the rules the crawler promised to keep,
and re-derives from those alone whether each request was allowed. It shares
no code with the crawler: robots.txt and Retry-After are read by
:mod:`courtier.sim.reference`, and the back-off promise (DESIGN.md §1: after
a 429/5xx/failed request without a usable Retry-After, the host is left
alone for 5 s, doubling with every failure in a row up to an hour, ±25 %
jitter) is written down here as numbers, not imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from courtier.sim.reference import ReferenceRobots, retry_after_until

EPSILON = 1e-6


@dataclass(frozen=True, slots=True)
class BackoffPromise:
    """The least pause a host may get after ``k`` failures in a row (no Retry-After)."""

    base: float = 5.0
    cap: float = 3600.0
    jitter: float = 0.25

    def least_pause(self, failures: int) -> float:
        return min(self.cap, self.base * 2.0 ** min(failures - 1, 30)) * (1 - self.jitter)


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
    robots: ReferenceRobots | None = None  # last good copy served
    robots_allow_all: bool = False
    robots_unreachable: bool = False
    robots_seen: bool = False
    blocked_until: float = 0.0
    failures: int = 0                    # page answers in a row that call for back-off


@dataclass(slots=True)
class Observer:
    """Checks every simulated request against the promises of DESIGN.md §1."""

    agent: str
    delay: float
    max_in_flight: int
    max_in_flight_per_ip: int
    backoff: BackoffPromise = field(default_factory=BackoffPromise)
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
            problems.append(f"request during back-off (until {view.blocked_until:.3f})")
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
               body: bytes = b"", retry_after: str | None = None,
               dropped: bool = False) -> None:
        """A request ended; ``dropped``: the client went away before the answer (a crash,
        a shutdown), so nothing was learnt from it."""
        view = self._hosts[host]
        view.in_flight -= 1
        self._ip_in_flight[ip] -= 1
        self.requests.append(SimRequest(host, ip, path, start, now, status))
        if dropped:
            pass
        elif path != "/robots.txt":
            self._judge_backoff(view, now, status, retry_after)
        elif status in (429, 503) and retry_after is not None:
            until = retry_after_until(retry_after, now)
            if until is not None:
                view.blocked_until = max(view.blocked_until, until)
        if path == "/robots.txt":
            view.robots_seen = True
            if 200 <= status < 300:
                view.robots = ReferenceRobots.parse(body)
                view.robots_allow_all = False
                view.robots_unreachable = False
            elif 400 <= status < 500 and status != 429:
                view.robots_allow_all = True
                view.robots_unreachable = False
                view.robots = None
            else:
                view.robots_unreachable = True
                view.robots_allow_all = False

    def _judge_backoff(self, view: _HostView, now: float, status: int,
                       retry_after: str | None) -> None:
        """After a failed page request (status 0: no answer), the host must rest."""
        if not (status == 0 or status == 429 or status >= 500):
            view.failures = 0
            return
        view.failures += 1
        until = None
        if status in (429, 503) and retry_after is not None:
            until = retry_after_until(retry_after, now)
            if until is not None and until <= now:
                until = None
        if until is None:
            until = now + self.backoff.least_pause(view.failures)
        view.blocked_until = max(view.blocked_until, until)
