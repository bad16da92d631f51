"""The two-level frontier: pick a host that may be fetched now, then its best URL.

Pure and clock-driven: every method reads time from the injected
:class:`~courtier.core.clock.Clock` and does no I/O, so the simulator and the
real worker drive the same code.

One class, :class:`Frontier`, owns all of the scheduling state: the host table
(``hosts``: :class:`~courtier.frontier.host.HostState` by host key) and the address
groups (``ips``), the two level-1 orders, the shard ``epochs`` stamped on leases, the
counts of queued URLs and leases out, and the URLs on their way back to the worker
(denied, released). Every method that changes a host reschedules it, and the grant
path, the results of leases and the host registry all move the same counters and
heaps, so they are one object in one module (sections: hosts, intake, the grant
path, leases that end, hand-offs, figures), not parts sharing ``self``. The per-host
and per-address state lives in ``host.py``, the ready order in ``ready.py``, the
robots decisions' work budget in ``robots_turns.py``.

Level 1 keeps hosts in two orders: the ``waiting`` heap by the time the host may
next start a request (``max(next_allowed_at, backoff_until, robots retry)``),
and ``ready`` (due now, ``ready.py``) best first: priority of the host's best URL,
with one grant in every ``TURN_EVERY`` for a lower priority (priority turns), then the
order in which hosts became ready. Level 2 is each host's own heap of URLs.
Entries carry a per-host token; an entry whose token is stale is skipped,
so rescheduling a host is O(log n) without searching the heaps.

The politeness clock is per *server* (host name), not per host key: every scheme and
port of one name shares one :class:`~courtier.frontier.host.ServerClock` (``servers``),
so ``http://h/`` and ``https://h/`` count against one in-flight cap, one delay (the
largest Crawl-delay of their robots.txt files governs) and one back-off. Queues,
robots.txt and policies stay per host key.

Invariants the frontier keeps for every server (host name):

* at most ``max_in_flight`` leases out at once (robots fetches included; the cap of
  the host asking), and at most ``max_in_flight_per_ip`` to all hosts known to share
  one address;
* two lease start times at least the delay in force apart, whichever scheme or port
  each is for; with one request in flight (the default) the delay runs from the end
  of the previous fetch, which bounds the gap the server observes too;
* no page lease before robots.txt has been fetched (or while it is expired);
* no page lease while the host is backing off or robots.txt is unreachable
  with no earlier good copy;
* no page lease for a URL its robots.txt disallows (those are *denied*);
* no lease at all for a host whose every URL is settled without a request: blocked
  (policy, SSRF guard) or an http host that upgrades to https (its URLs are denied,
  and become redirects to their https twins).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import random
from collections.abc import Collection, Iterable, Mapping

from courtier.core.clock import Clock
from courtier.core.logs import log_event
from courtier.core.records import DAY, DueUrl, HostRecord
from courtier.core.urls import host_key_of, server_of, shard_of
from courtier.frontier.host import HostPolicy, HostState, IpState, ServerClock
from courtier.frontier.lease import FetchFeedback, Lease, LeaseKind
from courtier.frontier.ready import TURN_EVERY, ReadyHosts
from courtier.frontier.robots_turns import UNITS_PER_TURN, decide_head
from courtier.politeness.delays import DelayPolicy, base_delay
from courtier.politeness.robots import RobotsTxt
from courtier.politeness.robots_state import RobotsPolicy, RobotsStatus

log = logging.getLogger("courtier.frontier")

#: (url row, reason, detail); reason: "robots", "blocked" (domain policy),
#: "blocked_address" (the SSRF guard refused its address), "robots_unreachable[:KIND]",
#: :data:`UPGRADE_DENIAL` (an http host that moved to https); detail: the robots digest
#: (robots), the https host key (an upgrade), else None
Denial = tuple[DueUrl, str, str | None]
#: the denial of an http URL whose host redirects its URLs to https (crawl/https_upgrade.py)
UPGRADE_DENIAL = "https_upgrade"


def robots_unreachable_kind(last_error: str | None) -> str:
    """The error_kind of a URL given up because its host's robots.txt stayed
    unreachable: ``robots_unreachable:<why>`` (``:dns``, ``:http_503``, ``:tls_expired``…),
    plain ``robots_unreachable`` when the reason is not known."""
    if last_error is None or last_error == "error":
        return "robots_unreachable"
    return f"robots_unreachable:{last_error}"

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


class Frontier:
    """In-memory scheduling state of the shards this process owns.

    One object owns all of it (see the module docstring); its sections are the host
    registry, intake, the grant path, leases that end, the hand-offs and the figures."""

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
        turn_every: int | None = TURN_EVERY,
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
        #: the politeness clock of each host name with a registered host
        self.servers: dict[str, ServerClock] = {}
        self.ips: dict[str, IpState] = {}
        self._waiting: list[tuple[float, int, int, str]] = []
        self._ready = ReadyHosts(turn_every)
        self._seq = itertools.count()
        self._denied: list[Denial] = []
        self._released: list[tuple[DueUrl, float]] = []
        self._queued = 0
        self._in_flight = 0
        self._robots_units = UNITS_PER_TURN  # robots decisions left in this turn
        self.robots_units_spent = 0  # work units of robots decisions so far (tests, bench)

    # ---- hosts: registration and changes from outside ---------------------------------

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
        name = server_of(host_key)
        server = self.servers.get(name)
        if server is None:
            server = self.servers[name] = ServerClock(name)
        server.join(host_key)
        host = HostState(host_key=host_key, shard=shard, server=server, loaded=True, ip=ip)
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
            timing = host.timing  # the server's: a sibling's live back-off is kept
            timing.backoff_until = max(timing.backoff_until, record.backoff_until or 0.0)
            host.https_upgrade = record.https_upgrade
            # We may have fetched from this host moments ago (a restart after a crash or
            # a shard takeover); its last start time is unknown, so wait one delay.
            host.next_allowed_at = max(host.next_allowed_at,
                                       self.clock.now() + self.delay_for(host))
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

    def upgrade_to_https(self, host_key: str, https_host_key: str) -> None:
        """The http host redirects its URLs to the same URLs under ``https_host_key``: none
        of them is requested any more; its queued URLs (and any that come) are denied
        with :data:`UPGRADE_DENIAL`, the https host key as the detail."""
        host = self.hosts.get(host_key)
        if host is not None:
            host.https_upgrade = https_host_key
            self._reschedule(host)

    def block_address(self, host_key: str) -> None:
        """The host's address is refused by the SSRF guard: deny its URLs (outcome BLOCKED)
        instead of retrying them; the host is re-checked when its state is next created."""
        host = self.hosts.get(host_key)
        if host is not None:
            host.address_blocked = True
            self._reschedule(host)

    # ---- intake ---------------------------------------------------------------------------

    def add(self, items: Iterable[DueUrl]) -> None:
        """Queue URL rows loaded from the store. Their hosts must be registered first."""
        touched: dict[str, HostState] = {}
        now = self.clock.now()
        for due in items:
            host = self.hosts[due.host_key]
            if not host.queue:
                host.filled_at = now
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
                ready.skipped()
                continue
            ready_at = self._ready_at(host)  # shared (per-IP) limits may have changed since
            if ready_at is None or ready_at > now:
                self._reschedule(host)
                continue
            lease = self._lease_from(host, now)
            if lease is not None and lease.kind is _PAGE:
                in_flight = host.server.in_flight
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

    def _deny_all(self, host: HostState) -> bool:
        """A host none of whose URLs is requested — blocked (policy or SSRF guard), or an
        http host that upgrades to https — has its queued URLs denied; True if so."""
        detail = None
        if host.policy.blocked:
            why = "blocked"
        elif host.address_blocked:
            why = "blocked_address"
        elif host.https_upgrade is not None:
            why, detail = UPGRADE_DENIAL, host.https_upgrade
        else:
            return False
        for due in host.drain():
            self._queued -= 1
            self._denied.append((due, why, detail))
        return True

    def _lease_from(self, host: HostState, now: float) -> Lease | None:
        if (host.policy.blocked or host.address_blocked or host.https_upgrade is not None) \
                and self._deny_all(host):
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
        server = host.server
        server.in_flight += 1
        server.live = True
        self._in_flight += 1
        server.next_allowed_at = now + delay
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
        """The Crawl-delay in force for the host's server: the largest its hosts' robots.txt
        files ask of our agent (None: none), each remembered per host for as long as the
        same rules object is in force."""
        rules = host.robots.rules_in_force()
        if host.delay_rules is not rules:
            self._note_rules(host, rules)
        return host.server.crawl_delay or None

    def _note_rules(self, host: HostState, rules: RobotsTxt | None) -> None:
        """``rules`` are in force for ``host`` now (None: none): its Crawl-delay joins the
        server's (a host without rules asks for none)."""
        host.delay_rules = rules
        host.crawl_delay = None if rules is None else rules.crawl_delay(self.agent)
        host.server.note_crawl_delay(host.host_key, host.crawl_delay)

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
        if host.delay_rules is not rules:
            self._note_rules(host, rules)
        server = host.server
        # the largest Crawl-delay of the server's robots.txt files (http and https may
        # differ: the slower one governs every request to the server)
        asked = server.crawl_delay
        override = host.policy.delay  # base_delay and effective_delay, inlined
        delay = self.delay_policy.delay if override is None else override
        if asked > delay:
            delay = asked
        timing = server.timing
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
        server = host.server  # the shared clock, read directly (the properties, inlined)
        in_flight = server.in_flight
        if in_flight >= (policy.max_in_flight or self.max_in_flight) and in_flight >= 1:
            return None  # at _max_in_flight(host)
        at = server.next_allowed_at
        backoff = server.timing.backoff_until
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
            if (host.policy.blocked or host.address_blocked
                    or host.https_upgrade is not None) and self._deny_all(host):
                return  # never released to be retried: settled without a request
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

    # ---- leases that end: results, hand-backs, deferrals ------------------------------

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
            until = timing.record_failure(now, self.delay_policy, self.rng, feedback.retry_at)
            if log.isEnabledFor(logging.INFO):
                why = "network error" if status is None else f"status {status}"
                log_event(log, logging.INFO, "backoff",
                          "backing off %s for %.1f s after %s (%d in a row)", host.host_key,
                          until - now, why, timing.failures, host=host.host_key,
                          url=lease.url, shard=host.shard, reason=why, status=status,
                          seconds=round(until - now, 3), failures=timing.failures,
                          retry_after=feedback.retry_at is not None)
        else:
            timing.record_success(feedback.elapsed, self.delay_policy)
            if timing.throttle_delay > 0:  # recover() does nothing otherwise
                timing.recover(self.base_delay_for(host), self.delay_policy)
        self._space_next(host, lease)
        self._reschedule_server(host)

    def finish_robots(
        self, lease: Lease, status: int | None, body: bytes = b"", location: str | None = None,
        ip: str | None = None, retry_at: float | None = None, parsed: RobotsTxt | None = None,
        error_kind: str | None = None, error_detail: str | None = None,
    ) -> None:
        """A robots.txt fetch ended (status None = network error, ``error_kind`` its
        FetchError kind and ``error_detail`` its message: the host's robots state keeps
        them); ``parsed``: its body already parsed off the loop."""
        host = self._release_slot(lease, ip)
        host.robots_in_flight = False
        now = self.clock.now()
        if status in (429, 503):  # overloaded, even for robots.txt: lower the rate too
            host.timing.throttle(self.delay_for(host), self.delay_policy)
        if status is None:
            host.robots.on_unreachable(now, self.robots_policy, error_kind or "error",
                                       error_detail)
        else:
            host.robots.on_response(status, body, now, self.robots_policy, location, retry_at,
                                    parsed)
        if log.isEnabledFor(logging.INFO):
            decision = str(host.robots.status)
            log_event(log, logging.INFO, "robots_txt", "robots.txt of %s: %s (status %s)",
                      host.host_key, decision, status, host=host.host_key, url=lease.url,
                      shard=host.shard, outcome=decision, status=status,
                      reason="network error" if status is None else f"status {status}")
        self._space_next(host, lease)
        self._reschedule_server(host)

    def _release_slot(self, lease: Lease, ip: str | None = None) -> HostState:
        host = self.hosts[lease.host_key]
        host.server.in_flight -= 1
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

    def _reschedule_server(self, host: HostState) -> None:
        """Reschedule ``host`` and the other hosts of its server: a slot of the shared
        clock freed, or its next start moved (call after the clock is updated)."""
        self._reschedule(host)
        members = host.server.members
        if len(members) > 1:  # siblings may have waited for the slot
            hosts = self.hosts
            for key in members:
                if key != host.host_key and key in hosts:
                    self._reschedule(hosts[key])

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
        server = host.server
        if at > server.next_allowed_at:
            server.next_allowed_at = at

    def return_lease(self, lease: Lease) -> None:
        """Give an unstarted or abandoned lease back (shutdown): its URL is released."""
        host = self._release_slot(lease)
        if lease.kind is LeaseKind.ROBOTS:
            host.robots_in_flight = False
        elif lease.due is not None:
            self._released.append((lease.due, lease.due.next_fetch_at))
        self._reschedule_server(host)

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
        self._reschedule_server(host)

    # ---- hand-offs to the worker ------------------------------------------------------------

    def rerank(self) -> None:
        """Re-rank every host's queue: URLs that became overdue while waiting in memory
        move ahead (call every minute or so)."""
        now = self.clock.now()
        for host in self.hosts.values():
            if host.queue:
                host.rerank(now)
                self._reschedule(host)

    def hand_back_stale(self, older_than: float) -> int:
        """Drop the queued URLs of hosts whose queue has held URLs for ``older_than``
        seconds or more (a Crawl-delay, a spent budget): the refill reads a host only once
        nothing of it is held (crawl/refiller.py), so without this such a host's URLs
        that became due or better since would wait until its queue ran dry. The rows are
        QUEUED in the store as they were read: dropping them writes nothing, and the next
        refill reads the host's best rows again (without it, tests/sim/test_freshness_sim.py's
        short-budget crawl sent the budget to changing and static pages alike: the rows
        read days before were fetched first). Returns the URLs dropped."""
        cutoff = self.clock.now() - older_than
        dropped = 0
        for host in self.hosts.values():
            if host.queue and host.filled_at <= cutoff:
                dropped += len(host.drain())
                host.token += 1
        self._queued -= dropped
        return dropped

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
            self._drop(host)
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

    def holding_hosts(self) -> set[str]:
        """Hosts of which this frontier holds URL rows: queued, or denied and not taken
        yet (crawl/refiller.py: the refill reads rows without marking them, so what is
        held is known only here). URLs handed back (``take_released``) are not held."""
        held = {key for key, host in self.hosts.items() if host.queue}
        held.update(due.host_key for due, _, _ in self._denied)
        return held

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
            self._drop(self.hosts[key])

    def _drop(self, host: HostState) -> None:
        """Forget ``host``; its server's clock goes with its last host."""
        del self.hosts[host.host_key]
        server = host.server
        server.leave(host.host_key)
        if not server.members and self.servers.get(server.name) is server:
            del self.servers[server.name]
