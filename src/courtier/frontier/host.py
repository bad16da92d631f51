"""Per-host scheduling state: small slotted objects, owned by one frontier.

A host (``scheme://authority``) has its own URL queue and robots.txt (RFC 9309 keys
robots.txt by scheme and authority); its politeness clock — the requests in flight, the
earliest next start, back-off, Retry-After, the AIMD throttle, the adaptive delay and the
largest Crawl-delay of its robots.txt files — is the :class:`ServerClock` of its host
name, shared by every scheme and port of that name (``http://h/``, ``https://h/`` and
``https://h:8443/`` are one server to the people who run it; docs/fetch.md).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from courtier.core.records import OVERDUE_AFTER, DueUrl
from courtier.core.urls import registrable_domain, server_of
from courtier.politeness.delays import HostTiming
from courtier.politeness.robots_state import RobotsState


@dataclass(slots=True)
class HostPolicy:
    """Per-host overrides; None means the crawl-wide default."""

    delay: float | None = None
    max_in_flight: int | None = None
    max_pages: int | None = None
    blocked: bool = False

    def is_default(self) -> bool:
        return self == HostPolicy()


def domain_host_key(host_key: str) -> str | None:
    """The host key of ``host_key``'s registrable domain (same scheme and port), whose
    policy covers it when it has none of its own; None when the host *is* that domain
    (or an IP address / single label). ``http://www.example.com:8080`` →
    ``http://example.com:8080``."""
    scheme, sep, authority = host_key.partition("://")
    if not sep or authority.startswith("["):
        return None
    host, colon, port = authority.rpartition(":")
    if not colon:
        host, port = authority, ""
    domain = registrable_domain(host)
    if domain == host or not host.endswith("." + domain):
        return None
    return f"{scheme}://{domain}" + (f":{port}" if port else "")


@dataclass(slots=True)
class ServerClock:
    """The politeness clock of one host name, shared by its hosts (every scheme and port).

    Owns: the requests in flight to the server, the earliest time the next may start,
    the timing (back-off, Retry-After, throttle, adaptive delay), which host keys share
    it (``members``) and the Crawl-delay each one's robots.txt asks (the largest
    governs all: ``crawl_delay``). ``live``: a request was issued against it by this
    process, so a clock saved by an earlier owner is older and is not restored over it.
    """

    name: str
    in_flight: int = 0
    next_allowed_at: float = 0.0
    timing: HostTiming = field(default_factory=HostTiming)
    #: the host keys sharing it (usually one: a list is the smallest container)
    members: list[str] = field(default_factory=list)
    #: host key → the Crawl-delay its rules in force ask (None until one asks any)
    crawl_delays: dict[str, float] | None = None
    crawl_delay: float = 0.0
    live: bool = False

    def join(self, host_key: str) -> None:
        if host_key not in self.members:
            self.members.append(host_key)

    def note_crawl_delay(self, host_key: str, delay: float | None) -> None:
        """``host_key``'s robots.txt in force asks for ``delay`` (None: none)."""
        delays = self.crawl_delays
        if delay:
            if delays is None:
                delays = self.crawl_delays = {}
            delays[host_key] = delay
        elif delays is None:
            return
        else:
            delays.pop(host_key, None)
        self.crawl_delay = max(delays.values(), default=0.0)

    def leave(self, host_key: str) -> None:
        """``host_key``'s state is dropped. Its Crawl-delay keeps counting for as long as
        the clock lives: the clock of hosts leaving together (a shard handed over) is
        saved after they left, with the delay they had in force."""
        if host_key in self.members:
            self.members.remove(host_key)


@dataclass(slots=True)
class IpState:
    """Limits shared by every host that resolves to one address."""

    in_flight: int = 0
    next_allowed_at: float = 0.0
    waiting: set[str] = field(default_factory=set)   # hosts held back by the IP cap


# OVERDUE_AFTER (a URL overdue by more than this outranks every other: the
# minimum-refresh guarantee) is part of the store's load_due contract: store/base.py
OVERDUE_BOOST = 100

Rank = tuple[int, float, int, bytes]
#: a host queue entry: the rank's four fields, then the URL (flat: one tuple comparison
#: level less per heap step than ``(rank, due)``; url_key is unique, so ``due`` is never
#: compared)
Entry = tuple[int, float, int, bytes, DueUrl]


def url_rank(due: DueUrl, now: float) -> Rank:
    """Best URL first: overdue (by OVERDUE_AFTER), then higher priority, then earlier due
    time, then smaller depth."""
    boost = OVERDUE_BOOST if due.next_fetch_at < now - OVERDUE_AFTER else 0
    return (-(due.priority + boost), due.next_fetch_at, due.depth, due.url_key)


@dataclass(slots=True)
class HostState:
    """One host key's queue, robots.txt and policy; its politeness clock is ``server``
    (``in_flight``, ``next_allowed_at`` and ``timing`` read and write it), shared with
    the other hosts of its name when the frontier registers them."""

    host_key: str
    shard: int
    queue: list[Entry] = field(default_factory=list)
    #: the server's clock; a host made on its own gets one of its own
    server: ServerClock = field(default=None)  # type: ignore[assignment]
    robots: RobotsState = field(default_factory=RobotsState)
    robots_in_flight: bool = False
    policy: HostPolicy = field(default_factory=HostPolicy)
    loaded: bool = False          # durable state (robots copy, policy) read from the store
    inherited_policy: bool = False  # policy comes from the registrable domain's host key
    pages_issued: int = 0
    day_start: float | None = None  # start of the current 24 h page-budget window
    day_pages: int = 0            # pages issued in that window (policy max_pages)
    ip: str | None = None         # last address connected to; hosts on one IP share limits
    waiters: set[str] = field(default_factory=set)  # hosts whose robots redirect waits on us
    address_blocked: bool = False  # the SSRF guard refused its address (until forgotten)
    token: int = 0                # bumps on every reschedule; stale heap entries are skipped
    robots_check: object = None   # a robots decision under way (frontier/robots_turns.py)
    #: the robots.txt rules ``crawl_delay`` was read from (by identity) and its value:
    #: the delay is looked up several times per lease, the rules change rarely
    delay_rules: object = None
    crawl_delay: float | None = None
    #: TLS handshakes (new connections) this process made to the host since its state
    #: was created, and how many of them resumed a session (crawl/handshakes.py)
    tls_handshakes: int = 0
    tls_resumed: int = 0
    #: an http host that redirects its URLs to the same URLs on https: the https host
    #: key they are settled to, without a request (crawl/https_upgrade.py); None: fetched
    https_upgrade: str | None = None
    #: when the queue last went from empty to holding URLs (Frontier.hand_back_stale)
    filled_at: float = 0.0

    def __post_init__(self) -> None:
        if self.server is None:
            self.server = ServerClock(server_of(self.host_key), members=[self.host_key])

    @property
    def in_flight(self) -> int:
        """Requests in flight to the server (every scheme and port of the host name)."""
        return self.server.in_flight

    @in_flight.setter
    def in_flight(self, value: int) -> None:
        self.server.in_flight = value

    @property
    def next_allowed_at(self) -> float:
        """Earliest start of the server's next request (any scheme or port)."""
        return self.server.next_allowed_at

    @next_allowed_at.setter
    def next_allowed_at(self, value: float) -> None:
        self.server.next_allowed_at = value

    @property
    def timing(self) -> HostTiming:
        """The server's back-off, Retry-After, throttle and adaptive delay."""
        return self.server.timing

    @timing.setter
    def timing(self, value: HostTiming) -> None:
        self.server.timing = value

    def push(self, due: DueUrl, now: float) -> None:
        heapq.heappush(self.queue, (*url_rank(due, now), due))

    def rerank(self, now: float) -> None:
        """Recompute ranks (URLs waiting in memory may have become overdue)."""
        self.queue = [(*url_rank(entry[4], now), entry[4]) for entry in self.queue]
        heapq.heapify(self.queue)

    def pop(self) -> DueUrl:
        return heapq.heappop(self.queue)[4]

    def peek(self) -> DueUrl:
        return self.queue[0][4]

    def best_priority(self) -> int:
        """Priority of the best queued URL, overdue boost included (level-1 order)."""
        return -self.queue[0][0] if self.queue else 0

    def drain(self) -> list[DueUrl]:
        items = [entry[4] for entry in self.queue]
        self.queue.clear()
        return items
