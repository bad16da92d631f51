"""Robots decisions against a hostile robots.txt are taken in bounded turns (issue 14).

The bound is an operation count, not a time: every turn (the ``next_lease``
calls up to the one returning None, after which the worker yields to the
loop) spends at most ``UNITS_PER_TURN`` work units plus one rule's worth, while
the whole decision of one URL costs many times that. The verdicts are those of
the one-shot matcher, and a URL whose decision is under way is never lost.
"""

from __future__ import annotations

from courtier.core.clock import VirtualClock
from courtier.frontier import Frontier, LeaseKind
from courtier.frontier.robots_turns import UNITS_PER_TURN
from courtier.frontier.scheduler import path_of
from courtier.politeness.delays import DelayPolicy
from courtier.politeness.robots import RobotsTxt
from courtier.politeness.robots_match import FIND_SPAN
from courtier.politeness.robots_state import RobotsPolicy
from tests.unit.frontier.test_scheduler import add, due

#: a plain Disallow, then ~20,000 longer Allow rules with "*" that the paths below
#: never match: every one of them must be tried before /d can win
HOSTILE = ("User-agent: *\nDisallow: /d\n"
           + "".join(f"Allow: /*aaaaaaaaaaaa{i}*y\n" for i in range(20_000))).encode()
LONG = "a" * 1500
URLS = [f"http://h.test/d/{LONG}{k}" for k in range(4)] + [f"http://h.test/ok/{LONG}"]


def fetched_frontier() -> tuple[VirtualClock, Frontier]:
    clock = VirtualClock(1000.0)
    frontier = Frontier(clock, "courtier", DelayPolicy(delay=0.0, adaptive_factor=0.0),
                        RobotsPolicy())
    add(frontier, *(due(url) for url in URLS))
    robots = frontier.next_lease()
    assert robots is not None and robots.kind is LeaseKind.ROBOTS
    frontier.finish_robots(robots, 200, HOSTILE)
    return clock, frontier


def one_turn(frontier: Frontier) -> list[str]:
    issued = []
    while (lease := frontier.next_lease()) is not None:
        issued.append(lease.url)
    return issued


def test_hostile_decisions_are_split_into_bounded_turns() -> None:
    _, frontier = fetched_frontier()
    rules = RobotsTxt.parse(HOSTILE)
    expected = {url: rules.allowed("courtier", path_of(url)) for url in URLS}
    assert list(expected.values()) == [False] * 4 + [True]
    # one rule's worth: 20 units of weight, times the span of a 1,500-character path
    overshoot = 20 * (1 + len(URLS[0]) // FIND_SPAN) + 256
    issued: list[str] = []
    per_turn: list[int] = []
    for _ in range(10_000):  # bounded; each turn makes progress
        before = frontier.robots_units_spent
        issued += one_turn(frontier)
        per_turn.append(frontier.robots_units_spent - before)
        if frontier.queued == 0:
            break
    assert max(per_turn) <= UNITS_PER_TURN + overshoot
    # a single decision alone costs several turns' worth of work
    assert frontier.robots_units_spent > 5 * UNITS_PER_TURN
    assert len(per_turn) > 5
    denied = [d.url for d, reason, _ in frontier.take_denied() if reason == "robots"]
    assert sorted(denied) == sorted(u for u, ok in expected.items() if not ok)
    assert issued == [u for u, ok in expected.items() if ok]


def test_a_url_whose_decision_is_under_way_is_released_on_shutdown() -> None:
    _, frontier = fetched_frontier()
    assert one_turn(frontier) == []  # the first turn ends inside the first decision
    assert frontier.queued == len(URLS)
    released = {due.url for due, _ in frontier.release_all()}
    assert released == set(URLS)


def test_ordinary_rules_decide_many_urls_in_one_turn() -> None:
    clock = VirtualClock(1000.0)
    frontier = Frontier(clock, "courtier", DelayPolicy(delay=0.0, adaptive_factor=0.0),
                        RobotsPolicy(), max_in_flight_per_host=100)
    urls = [f"http://o.test/private/{i}" for i in range(50)] + ["http://o.test/open"]
    add(frontier, *(due(url) for url in urls))
    robots = frontier.next_lease()
    assert robots is not None
    frontier.finish_robots(robots, 200, b"User-agent: *\nDisallow: /private/\n")
    assert one_turn(frontier) == ["http://o.test/open"]
    assert len(frontier.take_denied()) == 50
