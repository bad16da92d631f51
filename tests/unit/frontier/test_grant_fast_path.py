"""The grant path's fast paths decide what the slow path they replace decides.

``SlowFrontier`` below is the frontier's grant path as it was before the fourth
round of grant-path work (2026-12-03): every helper called, nothing inlined, the
robots decision taken by the stepped walk. Random crawls (several hosts, robots.txt
answers of every kind and expiring copies, plain and ``*`` rules, Crawl-delay,
per-host policies, shared addresses, throttling, back-off and Retry-After) are run
on both under the same driver; the leases (time, delay, robots digest…), the
denials, the releases and the robots work spent must be the same, step for step.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from courtier.core.clock import VirtualClock
from courtier.core.records import DueUrl
from courtier.frontier import FetchFeedback, Frontier, HostPolicy, Lease, LeaseKind
from courtier.frontier.host import HostState
from courtier.frontier.robots_turns import UNITS_PER_TURN, PendingCheck
from courtier.frontier.scheduler import DAY, path_of, robots_unreachable_kind
from courtier.politeness.delays import DelayPolicy, HostTiming, effective_delay
from courtier.politeness.robots import RobotsTxt
from courtier.politeness.robots_match import PathCheck
from courtier.politeness.robots_state import RobotsPolicy, RobotsStatus
from tests.unit.frontier.test_scheduler import due

# ---- the reference: the grant path before the fast paths ---------------------------------


def slow_decide_head(host: HostState, rules: RobotsTxt, agent: str, path: str,
                     budget: int) -> tuple[DueUrl | None, bool, int]:
    """``robots_turns.decide_head`` with every decision taken by the stepped walk."""
    due_url = host.peek()
    pending = host.robots_check
    if isinstance(pending, PendingCheck) and pending.rules is rules \
            and pending.url_key == due_url.url_key:
        check, fresh = pending.check, False
    else:
        path, rule_set, verdict = rules._rules_for(agent, path)
        check = PathCheck.decided(verdict) if rule_set is None \
            else PathCheck(rule_set._walk(path))
        fresh = True
    spent = check.advance(budget)
    if not check.done:
        if fresh:
            host.robots_check = PendingCheck(rules, due_url.url_key, check)
        return None, False, spent
    host.robots_check = None
    host.pop()
    return due_url, check.allowed, spent


class SlowFrontier(Frontier):
    """The grant path of 8e2f5c8 in its plainest form: the helpers called where it
    inlined them, ``max()`` where it compares, the robots walk above."""

    def next_lease(self) -> Lease | None:
        lease = self._slow_next_lease()
        if lease is None:
            self._robots_units = UNITS_PER_TURN
        return lease

    def _slow_next_lease(self) -> Lease | None:
        now = self.clock.now()
        waiting, ready = self._waiting, self._ready
        while waiting and waiting[0][0] <= now:
            _, _, token, key = heapq.heappop(waiting)
            host = self.hosts.get(key)
            if host is not None and host.token == token:
                ready.push(host.best_priority(), token, key)
        while self._robots_units > 0 and (entry := ready.pop()) is not None:
            token, key = entry
            host = self.hosts.get(key)
            if host is None or host.token != token:
                ready.skipped()
                continue
            ready_at = self._ready_at(host)
            if ready_at is None or ready_at > now:
                self._reschedule(host)
                continue
            lease = self._lease_from(host, now)
            if lease is not None and lease.kind is LeaseKind.PAGE \
                    and host.in_flight >= self._max_in_flight(host):
                host.token += 1
                return lease
            self._reschedule(host)
            if lease is not None:
                return lease
        return None

    def _lease_from(self, host: HostState, now: float) -> Lease | None:
        if self._deny_all(host):
            return None
        if host.robots.needs_fetch(now):
            if host.in_flight > 0:
                return None
            url = host.robots.fetch_url or host.host_key + "/robots.txt"
            lease = self._issue(host, now, LeaseKind.ROBOTS, url, None)
            other = self._redirect_target(host)
            if other is not None:
                other.in_flight += 1
                other.next_allowed_at = max(other.next_allowed_at, now + self.delay_for(other))
                lease.also_host = other.host_key
            return lease
        rules = host.robots.rules_in_force()
        if rules is None:
            return None
        while host.queue and self._robots_units > 0:
            decided, allowed, spent = slow_decide_head(host, rules, self.agent,
                                                       path_of(host.peek().url),
                                                       self._robots_units)
            self._robots_units -= spent
            self.robots_units_spent += spent
            if decided is None:
                return None
            self._queued -= 1
            if allowed:
                return self._issue(host, now, LeaseKind.PAGE, decided.url, decided, rules.digest)
            self._denied.append((decided, "robots", rules.digest))
        return None

    def _issue(self, host: HostState, now: float, kind: LeaseKind, url: str,
               due: DueUrl | None, digest: str | None = None) -> Lease:
        delay = self.delay_for(host)
        host.in_flight += 1
        self._in_flight += 1
        host.next_allowed_at = now + delay
        if host.ip is not None:
            ip = self.ips[host.ip]
            ip.in_flight += 1
            ip.next_allowed_at = max(ip.next_allowed_at, now + self.ip_delay)
        if kind is LeaseKind.ROBOTS:
            host.robots_in_flight = True
        else:
            host.pages_issued += 1
            if host.day_start is None or now - host.day_start >= DAY:
                host.day_start, host.day_pages = now, 0
            host.day_pages += 1
        return Lease(kind, host.host_key, url, now, self.epochs.get(host.shard, 0), delay, due,
                     digest, host.ip)

    def delay_for(self, host: HostState) -> float:
        # the Crawl-delay is the server's: the largest of its hosts' rules in force
        rules = host.robots.rules_in_force()
        if host.delay_rules is not rules:
            host.delay_rules = rules
            host.crawl_delay = None if rules is None else rules.crawl_delay(self.agent)
            host.server.note_crawl_delay(host.host_key, host.crawl_delay)
        crawl_delay = host.server.crawl_delay or None
        return effective_delay(self.delay_policy, host.timing, crawl_delay, host.policy.delay)

    def _ready_at(self, host: HostState) -> float | None:
        if not host.queue or host.robots_in_flight:
            return None
        if host.in_flight >= self._max_in_flight(host):
            return None
        at = max(host.next_allowed_at, host.timing.backoff_until)
        other = self._redirect_target(host)
        if other is not None:
            if other.in_flight >= self._max_in_flight(other):
                other.waiters.add(host.host_key)
                return None
            at = max(at, other.next_allowed_at, other.timing.backoff_until)
        limit = host.policy.max_pages
        if limit is not None and host.day_start is not None and host.day_pages >= limit:
            at = max(at, host.day_start + DAY)
        if host.ip is not None:
            ip = self.ips[host.ip]
            if self.max_in_flight_per_ip and ip.in_flight >= self.max_in_flight_per_ip:
                ip.waiting.add(host.host_key)
                return None
            at = max(at, ip.next_allowed_at)
        robots = host.robots
        if robots.status is RobotsStatus.UNREACHABLE and robots.last_good is None:
            at = max(at, robots.retry_at)
        return at

    def _reschedule(self, host: HostState) -> None:
        host.token += 1
        if host.queue and self._deny_all(host):
            return
        if host.queue and host.robots.given_up(self.robots_policy):
            for item in host.drain():
                self._queued -= 1
                self._denied.append(
                    (item, robots_unreachable_kind(host.robots.last_error), None))
            return
        at = self._ready_at(host)
        if at is None:
            return
        if at > self.clock.now() + self.release_horizon:
            for item in host.drain():
                self._queued -= 1
                self._released.append((item, at))
            return
        heapq.heappush(self._waiting, (at, next(self._seq), host.token, host.host_key))

    def finish_page(self, lease: Lease, feedback: FetchFeedback) -> None:
        host = self._release_slot(lease, feedback.ip)
        status = feedback.status
        now = self.clock.now()
        if status in (429, 503):
            host.timing.throttle(self.delay_for(host), self.delay_policy)
        if status is None or status == 429 or status >= 500:
            host.timing.record_failure(now, self.delay_policy, self.rng, feedback.retry_at)
        else:
            host.timing.record_success(feedback.elapsed, self.delay_policy)
            host.timing.recover(self.base_delay_for(host), self.delay_policy)
        self._space_next(host, lease)
        self._reschedule(host)

    def _space_next(self, host: HostState, lease: Lease) -> None:
        delay = max(self.delay_for(host), lease.delay)
        at = (self.clock.now() if self._max_in_flight(host) == 1 else lease.issued_at) + delay
        host.next_allowed_at = max(host.next_allowed_at, at)


# ---- random crawls --------------------------------------------------------------------

ROBOTS_BODIES = [
    b"User-agent: *\nDisallow: /private/\n",
    b"User-agent: *\nDisallow: /\nAllow: /a\nCrawl-delay: 2\n",
    b"User-agent: courtier\nDisallow: /a/b\nAllow: /a/b$\nDisallow: /%7Ex\n"
    b"User-agent: *\nDisallow: /\n",
    b"User-agent: *\nDisallow: /*?q=\nAllow: /a*b$\nCrawl-delay: 0.5\n",
    b"User-agent: other\nDisallow: /\n",
    b"User-agent: *\nDisallow: /\xe3\x83\x84\nDisallow: /robots.txt\n",
    b"",
]
PATHS = ["/", "/a", "/a/b", "/a/b/c", "/private/x", "/a?q=1", "/ab", "/~x/y", "/%7Ex",
         "/\u30c4", "/robots.txt", "/robots.txt?x=1", "/p/q.html", "/a/xb"]
HOSTS = [f"http://h{i}.test" for i in range(4)]
#: robots.txt answers: (status, body index); status None is a network error
ROBOTS_ANSWERS = st.one_of(
    st.tuples(st.just(200), st.integers(0, len(ROBOTS_BODIES) - 1)),
    st.tuples(st.sampled_from([404, 403, 503, 429, 500, None]), st.just(0)),
    st.tuples(st.just(301), st.integers(0, len(HOSTS) - 1)),  # to that host's robots.txt
)
POLICIES = st.builds(HostPolicy, st.sampled_from([None, 0.0, 0.5, 3.0]),
                     st.sampled_from([None, None, 1, 2, 3]), st.sampled_from([None, None, 2]),
                     st.integers(0, 9).map(lambda n: n == 0))


@dataclass(frozen=True)
class HostSpec:
    urls: list[tuple[str, int]]             # (path, priority)
    robots: list[tuple[int | None, int]]    # robots.txt answers in turn; the last repeats
    policy: HostPolicy | None
    blocked: bool                           # refused by the SSRF guard
    ip: str | None


@dataclass(frozen=True)
class Scenario:
    hosts: dict[str, HostSpec]
    per_host: int
    per_ip: int
    ip_delay: float
    expiry: float
    adaptive: float
    seed: int


@st.composite
def host_specs(draw: st.DrawFn) -> HostSpec:
    return HostSpec(
        urls=draw(st.lists(st.tuples(st.sampled_from(PATHS), st.integers(0, 2)),
                           min_size=1, max_size=8)),
        robots=draw(st.lists(ROBOTS_ANSWERS, min_size=1, max_size=3)),
        policy=draw(st.one_of(st.none(), POLICIES)),
        blocked=draw(st.integers(0, 9)) == 0,
        ip=draw(st.sampled_from([None, None, "10.0.0.1", "10.0.0.2"])),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    hosts = HOSTS[:draw(st.integers(1, len(HOSTS)))]
    return Scenario(
        hosts={key: draw(host_specs()) for key in hosts},
        per_host=draw(st.integers(1, 2)),
        per_ip=draw(st.sampled_from([0, 1, 2])),
        ip_delay=draw(st.sampled_from([0.0, 0.7])),
        expiry=draw(st.sampled_from([3.0, 30.0, 3600.0])),
        adaptive=draw(st.sampled_from([0.0, 5.0])),
        seed=draw(st.integers(0, 2**32 - 1)),
    )


def _trace(frontier_type: type[Frontier], scenario: Scenario) -> list[object]:
    """Drive a frontier through ``scenario``; everything it hands out, step by step."""
    clock = VirtualClock(1000.0)
    frontier = frontier_type(
        clock, "courtier", DelayPolicy(delay=1.0, adaptive_factor=scenario.adaptive),
        RobotsPolicy(expiry=scenario.expiry, give_up_after=2),
        max_in_flight_per_host=scenario.per_host, max_in_flight_per_ip=scenario.per_ip,
        ip_delay=scenario.ip_delay, release_horizon=20.0, rng=random.Random(7))
    hosts = scenario.hosts
    rng = random.Random(scenario.seed)
    for key, spec in hosts.items():
        frontier.register_host(key, 0)
        if spec.policy is not None:
            frontier.set_policy(key, spec.policy)
        if spec.blocked:
            frontier.block_address(key)
        frontier.add([due(key + path, priority) for path, priority in spec.urls])
    robots_answers = {key: list(spec.robots) for key, spec in hosts.items()}
    trace: list[object] = []
    open_leases: list[Lease] = []
    for _ in range(400):
        while (lease := frontier.next_lease()) is not None:
            trace.append((lease.kind, lease.host_key, lease.url, lease.issued_at, lease.delay,
                          lease.robots_digest, lease.ip, lease.also_host))
            open_leases.append(lease)
        trace.append([(d.url, why, digest) for d, why, digest in frontier.take_denied()])
        trace.append([(d.url, at) for d, at in frontier.take_released()])
        trace.append((frontier.robots_units_spent, frontier.queued, frontier.in_flight))
        roll = rng.random()
        if open_leases and roll < 0.75:
            lease = open_leases.pop(rng.randrange(len(open_leases)))
            clock.advance(rng.choice([0.0, 0.05, 0.4, 2.5]))
            ip = hosts[lease.host_key].ip
            if lease.kind is LeaseKind.ROBOTS:
                answers = robots_answers[lease.host_key]
                robots_status, body = answers.pop(0) if len(answers) > 1 else answers[0]
                location = HOSTS[body] + "/robots.txt" if robots_status == 301 else None
                frontier.finish_robots(lease, robots_status,
                                       ROBOTS_BODIES[body] if robots_status == 200 else b"",
                                       location, ip=ip)
            else:
                status = rng.choice([200, 200, 200, 200, 404, 429, 503, 500, None])
                retry_at = clock.now() + 4.0 if rng.random() < 0.2 else None
                frontier.finish_page(lease, FetchFeedback(status, rng.choice([0.01, 0.3, 1.5]),
                                                          retry_at, ip))
        elif roll < 0.8:
            key = rng.choice(sorted(hosts))
            frontier.add([due(key + rng.choice(PATHS) + f"?n={rng.randrange(50)}",
                              rng.randrange(3))])
        else:
            wake = frontier.next_wake_at()
            if wake is None and not open_leases:
                break
            clock.set(max(clock.now(), wake if wake is not None else clock.now()) + rng.random())
    return trace


@settings(max_examples=250, deadline=None)
@given(scenarios())
def test_the_grant_path_grants_what_the_slow_path_grants(scenario: Scenario) -> None:
    fast = _trace(Frontier, scenario)
    slow = _trace(SlowFrontier, scenario)
    assert fast == slow


@settings(max_examples=300, deadline=None)
@given(
    st.floats(0.0, 10.0), st.sampled_from([None, 0.0, 0.5, 3.0]),
    st.sampled_from([0, 1, 2, 3]), st.floats(0.0, 40.0), st.floats(0.0, 40.0),
    st.sampled_from([b"", b"User-agent: *\nCrawl-delay: 2.5\n",
                     b"User-agent: courtier\nCrawl-delay: 0.25\n"]),
)
def test_delay_for_is_effective_delay(configured: float, override: float | None, status: int,
                                      adaptive: float, throttle: float, body: bytes) -> None:
    frontier = Frontier(VirtualClock(0.0), "courtier", DelayPolicy(delay=configured))
    frontier.register_host("http://a.test", 0)
    host = frontier.hosts["http://a.test"]
    host.policy = HostPolicy(delay=override)
    host.timing = HostTiming(adaptive_delay=adaptive, throttle_delay=throttle)
    robots = host.robots
    robots.status = list(RobotsStatus)[status]
    robots.rules = robots.last_good = RobotsTxt.parse(body)
    if status == 3 and adaptive > 20:
        robots.last_good = None  # unreachable, no good copy: no rules in force
    rules = robots.rules_in_force()
    crawl_delay = None if rules is None else rules.crawl_delay("courtier")
    for _ in range(2):  # the Crawl-delay is remembered for the rules in force
        assert frontier.delay_for(host) == effective_delay(
            frontier.delay_policy, host.timing, crawl_delay, override)
