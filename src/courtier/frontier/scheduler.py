"""The two-level frontier: pick a host that may be fetched now, then its best URL.

Pure and clock-driven: every method reads time from the injected
:class:`~courtier.clock.Clock` and does no I/O, so the simulator and the
real worker drive the same code.

Level 1 keeps hosts in two orders: the ``waiting`` heap by the time the host may
next start a request (``max(next_allowed_at, backoff_until, robots retry)``),
and ``ready`` (due now, ``ready.py``) best first: priority of the host's best URL,
then the order in which hosts became ready. Level 2 is each host's own heap of URLs.
Entries carry a per-host token; an entry whose token is stale is skipped,
so rescheduling a host is O(log n) without searching the heaps.

Invariants the frontier keeps for every host:

* at most ``max_in_flight`` leases out at once (robots fetches included), and
  at most ``max_in_flight_per_ip`` to all hosts known to share one address;
* two lease start times at least the delay in force apart; with one request
  in flight (the default) the delay runs from the end of the previous fetch,
  which bounds the gap the server observes too;
* no page lease before robots.txt has been fetched (or while it is expired);
* no page lease while the host is backing off or robots.txt is unreachable
  with no earlier good copy;
* no page lease for a URL its robots.txt disallows (those are *denied*).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Iterable, Mapping

from courtier.clock import Clock
from courtier.frontier.handoffs import Denial, FrontierHandoffs, robots_unreachable_kind
from courtier.frontier.host import HostState, IpState
from courtier.frontier.host_registry import FrontierHostRegistry
from courtier.frontier.lease import Lease, LeaseKind
from courtier.frontier.lease_results import FrontierLeaseResults
from courtier.frontier.ready import ReadyHosts
from courtier.frontier.robots_turns import UNITS_PER_TURN, decide_head
from courtier.politeness.delays import DelayPolicy, base_delay
from courtier.politeness.robots import RobotsTxt
from courtier.politeness.robots_state import RobotsPolicy, RobotsStatus
from courtier.records import DueUrl
from courtier.urls import host_key_of, shard_of

DAY = 24 * 3600.0

# enum members the grant path compares with, bound once: ``LeaseKind.PAGE`` is a lookup
# through the enum type's ``__getattr__`` hook, several times slower than a global's
_PAGE = LeaseKind.PAGE
_OK = RobotsStatus.OK
_UNAVAILABLE = RobotsStatus.UNAVAILABLE
_UNREACHABLE = RobotsStatus.UNREACHABLE
#: the rules of an unavailable (4xx) robots.txt: one shared instance
_ALLOW_ALL = RobotsTxt.allow_all()


def path_of(url: str) -> str:
    """Path and query of an absolute canonical URL (what robots.txt rules match)."""
    start = url.find("/", url.find("//") + 2)
    return url[start:] if start >= 0 else "/"


class Frontier(FrontierHostRegistry, FrontierLeaseResults, FrontierHandoffs):
    """In-memory scheduling state of the shards this process owns.

    The grant path is here; adding hosts and changing their state
    (``host_registry.py``), taking leases back (``lease_results.py``) and the
    hand-offs to the worker and figures (``handoffs.py``) are inherited."""

    def __init__(
        self,
        clock: Clock,
        agent_token: str,
        delay_policy: DelayPolicy | None = None,
        robots_policy: RobotsPolicy | None = None,
        max_in_flight_per_host: int = 1,
        epochs: Mapping[int, int] | None = None,
        release_horizon: float = 60.0,
        rng: random.Random | None = None,
        max_in_flight_per_ip: int = 8,
        ip_delay: float = 0.0,
    ) -> None:
        self.clock = clock
        self.agent = agent_token
        self.delay_policy = delay_policy or DelayPolicy()
        self.robots_policy = robots_policy or RobotsPolicy()
        self.max_in_flight = max_in_flight_per_host
        self.epochs: dict[int, int] = dict(epochs or {})
        self.release_horizon = release_horizon
        self.rng = rng or random.Random(0)
        self.max_in_flight_per_ip = max_in_flight_per_ip
        self.ip_delay = ip_delay
        self.hosts: dict[str, HostState] = {}
        self.ips: dict[str, IpState] = {}
        self._waiting: list[tuple[float, int, int, str]] = []
        self._ready = ReadyHosts()
        self._seq = itertools.count()
        self._denied: list[Denial] = []
        self._released: list[tuple[DueUrl, float]] = []
        self._queued = 0
        self._in_flight = 0
        self._robots_units = UNITS_PER_TURN  # robots decisions left in this turn
        self.robots_units_spent = 0  # work units of robots decisions so far (tests, bench)

    # ---- intake ---------------------------------------------------------------------------

    def add(self, items: Iterable[DueUrl]) -> None:
        """Queue URL rows loaded from the store. Their hosts must be registered first."""
        touched: dict[str, HostState] = {}
        now = self.clock.now()
        for due in items:
            host = self.hosts[due.host_key]
            host.push(due, now)
            self._queued += 1
            touched[due.host_key] = host
        for host in touched.values():
            self._reschedule(host)

    # ---- level 1 + level 2 ----------------------------------------------------------------

    def next_lease(self) -> Lease | None:
        """The next fetch that may start now, or None. Call again until None.

        The calls up to the one returning None are one *turn*: together they spend
        at most about ``robots_turns.UNITS_PER_TURN`` of robots decisions, so the
        caller must yield to the event loop before the next turn."""
        now = self.clock.now()
        waiting, ready, hosts = self._waiting, self._ready, self.hosts
        while waiting and waiting[0][0] <= now:
            _, _, token, key = heapq.heappop(waiting)
            host = hosts.get(key)
            if host is not None and host.token == token:
                queue = host.queue  # host.best_priority(), inlined
                ready.push(-queue[0][0] if queue else 0, token, key)
        while self._robots_units > 0 and (entry := ready.pop()) is not None:
            token, key = entry
            host = hosts.get(key)
            if host is None or host.token != token:
                continue
            ready_at = self._ready_at(host)  # shared (per-IP) limits may have changed since
            if ready_at is None or ready_at > now:
                self._reschedule(host)
                continue
            lease = self._lease_from(host, now)
            if lease is not None and lease.kind is _PAGE:
                in_flight = host.in_flight
                if in_flight >= (host.policy.max_in_flight or self.max_in_flight) \
                        and in_flight >= 1:  # at _max_in_flight(host)
                    # what _reschedule comes to here (a page lease means the host is
                    # neither blocked nor without robots rules): busy until a fetch ends
                    host.token += 1
                    return lease
            self._reschedule(host)
            if lease is not None:
                return lease
        self._robots_units = UNITS_PER_TURN  # the turn ends: the caller yields now
        return None

    def _deny_blocked(self, host: HostState) -> bool:
        """A blocked host (policy or SSRF guard): deny its queued URLs; True if blocked."""
        if not (host.policy.blocked or host.address_blocked):
            return False
        why = "blocked" if host.policy.blocked else "blocked_address"
        for due in host.drain():
            self._queued -= 1
            self._denied.append((due, why, None))
        return True

    def _lease_from(self, host: HostState, now: float) -> Lease | None:
        if (host.policy.blocked or host.address_blocked) and self._deny_blocked(host):
            return None
        robots = host.robots
        status = robots.status
        if status is _OK and now < robots.expires_at:
            rules = robots.rules  # needs_fetch(now) is False, rules_in_force() these
        elif status is _UNAVAILABLE and now < robots.expires_at:
            rules = _ALLOW_ALL  # the same for a robots.txt that answered 4xx
        elif robots.needs_fetch(now):
            if host.in_flight > 0:
                return None  # rescheduled when the in-flight fetches finish
            url = host.robots.fetch_url or host.host_key + "/robots.txt"
            lease = self._issue_robots(host, now, url)
            other = self._redirect_target(host)
            if other is not None:  # the request lands on the other host: spend its tokens too
                other.in_flight += 1
                other.next_allowed_at = max(other.next_allowed_at, now + self.delay_for(other))
                lease.also_host = other.host_key
            return lease
        else:
            rules = robots.rules_in_force()
        if rules is None:
            return None  # unreachable robots.txt and no good copy: wait for the retry
        queue, agent = host.queue, self.agent
        while queue and self._robots_units > 0:  # else: on with it next turn
            url = queue[0][4].url
            start = url.find("/", url.find("//") + 2)  # path_of(url), inlined
            path = url[start:] if start >= 0 else "/"
            if host.robots_check is None \
                    and (at_once := rules.decide_at_once(agent, path)) is not None:
                # decide_head's first branch, inlined: no decision under way, and this
                # one takes one step (the usual case)
                decided: DueUrl | None = heapq.heappop(queue)[4]
                allowed = at_once[0] is not False
                spent = at_once[1]
            else:
                decided, allowed, spent = decide_head(host, rules, agent, path,
                                                      self._robots_units)
            self._robots_units -= spent
            self.robots_units_spent += spent
            if decided is None:
                return None  # a long decision: it goes on next turn
            self._queued -= 1
            if not allowed:
                self._denied.append((decided, "robots", rules.digest))
                continue
            delay = self._charge(host, now)  # then the page counts
            host.pages_issued += 1
            day_start = host.day_start
            if day_start is None or now - day_start >= DAY:
                host.day_start, host.day_pages = now, 1
            else:
                host.day_pages += 1
            return Lease(_PAGE, host.host_key, decided.url, now,
                         self.epochs.get(host.shard, 0), delay, decided, rules.digest, host.ip)
        return None

    def _charge(self, host: HostState, now: float) -> float:
        """Count one lease against the host and its IP (in flight, next allowed time);
        return the host's delay in force. Every lease, page or robots.txt, goes through it."""
        delay = self.delay_for(host)
        host.in_flight += 1
        self._in_flight += 1
        host.next_allowed_at = now + delay
        address = host.ip
        if address is not None:
            ip = self.ips[address]
            ip.in_flight += 1
            ip.next_allowed_at = max(ip.next_allowed_at, now + self.ip_delay)
        return delay

    def _issue_robots(self, host: HostState, now: float, url: str) -> Lease:
        """A robots.txt lease (page leases are issued in :meth:`_lease_from`)."""
        delay = self._charge(host, now)
        host.robots_in_flight = True
        return Lease(LeaseKind.ROBOTS, host.host_key, url, now, self.epochs.get(host.shard, 0),
                     delay, None, None, host.ip)

    def _crawl_delay(self, host: HostState) -> float | None:
        """The Crawl-delay of the rules in force for our agent (None: none or no rules),
        remembered per host for as long as the same rules object is in force."""
        rules = host.robots.rules_in_force()
        if rules is None:
            return None
        if host.delay_rules is not rules:
            host.delay_rules, host.crawl_delay = rules, rules.crawl_delay(self.agent)
        return host.crawl_delay

    def delay_for(self, host: HostState) -> float:
        """The gap in force: ``effective_delay`` of the host's policy, timing and
        Crawl-delay, with everything it calls inlined (twice per lease)."""
        robots = host.robots  # _crawl_delay and rules_in_force (when OK), inlined
        status = robots.status
        if status is _OK:
            rules = robots.rules
        elif status is _UNAVAILABLE:
            rules = _ALLOW_ALL
        else:
            rules = robots.rules_in_force()
        if rules is None:
            asked = 0.0
        elif host.delay_rules is rules:
            asked = host.crawl_delay or 0.0
        else:
            host.delay_rules, host.crawl_delay = rules, rules.crawl_delay(self.agent)
            asked = host.crawl_delay or 0.0
        override = host.policy.delay  # base_delay and effective_delay, inlined
        delay = self.delay_policy.delay if override is None else override
        if asked > delay:
            delay = asked
        timing = host.timing
        if timing.adaptive_delay > delay:
            delay = timing.adaptive_delay
        if timing.throttle_delay > delay:
            delay = timing.throttle_delay
        return delay

    def base_delay_for(self, host: HostState) -> float:
        """The configured gap (delay or per-host override, Crawl-delay): the throttle's floor."""
        return base_delay(self.delay_policy, self._crawl_delay(host), host.policy.delay)

    def max_in_flight_of(self, host: HostState) -> int:
        """The in-flight cap in force for this host (policy override or default)."""
        return self._max_in_flight(host)

    def _max_in_flight(self, host: HostState) -> int:
        cap = host.policy.max_in_flight or self.max_in_flight
        return cap if cap > 1 else 1  # max(1, cap), without the builtin's call overhead

    def _redirect_target(self, host: HostState) -> HostState | None:
        """The other host a robots.txt redirect points at (registered on first sight)."""
        url = host.robots.fetch_url
        if url is None:
            return None
        key = host_key_of(url)
        if key == host.host_key:
            return None
        if key not in self.hosts:
            self.register_host(key, shard_of(key))
        return self.hosts[key]

    def _ready_at(self, host: HostState) -> float | None:
        if not host.queue or host.robots_in_flight:
            return None
        policy = host.policy
        in_flight = host.in_flight
        if in_flight >= (policy.max_in_flight or self.max_in_flight) and in_flight >= 1:
            return None  # at _max_in_flight(host)
        at = host.next_allowed_at
        backoff = host.timing.backoff_until
        if backoff > at:
            at = backoff
        robots = host.robots
        other = None if robots.fetch_url is None else self._redirect_target(host)
        if other is not None:
            if other.in_flight >= self._max_in_flight(other):
                other.waiters.add(host.host_key)
                return None
            at = max(at, other.next_allowed_at, other.timing.backoff_until)
        limit = policy.max_pages
        if limit is not None and host.day_start is not None and host.day_pages >= limit:
            at = max(at, host.day_start + DAY)  # this host's daily page budget is spent
        address = host.ip
        if address is not None:
            ip = self.ips[address]
            if self.max_in_flight_per_ip and ip.in_flight >= self.max_in_flight_per_ip:
                ip.waiting.add(host.host_key)
                return None
            if ip.next_allowed_at > at:
                at = ip.next_allowed_at
        if robots.status is _UNREACHABLE and robots.last_good is None:
            at = max(at, robots.retry_at)
        return at

    def _reschedule(self, host: HostState) -> None:
        host.token += 1
        if host.queue:
            if (host.policy.blocked or host.address_blocked) and self._deny_blocked(host):
                return  # never released to be retried: their outcome is BLOCKED
            robots = host.robots  # given_up() is only ever True while unreachable
            if robots.status is _UNREACHABLE and robots.given_up(self.robots_policy):
                why = robots_unreachable_kind(robots.last_error)
                for due in host.drain():
                    self._queued -= 1
                    self._denied.append((due, why, None))
                return
        at = self._ready_at(host)
        if at is None:
            return
        if at > self.clock.now() + self.release_horizon:
            # a long wait (back-off, unreachable robots, huge Crawl-delay): hand the URLs
            # back to the store, due again when the host is; memory stays bounded
            for due in host.drain():
                self._queued -= 1
                self._released.append((due, at))
            return
        heapq.heappush(self._waiting, (at, next(self._seq), host.token, host.host_key))
