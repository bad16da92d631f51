"""ReadyHosts: best priority first with a turn in every TURN_EVERY for the lower
priorities, arrival order within a priority, empty levels go."""

from __future__ import annotations

import collections
import random

import pytest

from courtier.frontier.ready import TURN_EVERY, ReadyHosts


def test_strict_priority_then_arrival_order() -> None:
    ready = ReadyHosts(turn_every=None)
    assert ready.pop() is None and len(ready) == 0
    for token, (priority, key) in enumerate([(0, "a"), (5, "b"), (0, "c"), (5, "d"), (9, "e")]):
        ready.push(priority, token, key)
    assert len(ready) == 5
    assert [ready.pop() for _ in range(5)] == [(4, "e"), (1, "b"), (3, "d"), (0, "a"), (2, "c")]
    assert ready.pop() is None and len(ready) == 0


def test_strict_matches_a_sorted_reference_when_pushes_and_pops_interleave() -> None:
    rng = random.Random(5)
    ready, reference = ReadyHosts(turn_every=None), []
    arrival = 0
    for _ in range(5000):
        if rng.random() < 0.55:
            priority = rng.choice([0, 1, 20, 100, 130])
            ready.push(priority, arrival, f"h{arrival}")
            reference.append((-priority, arrival))
            arrival += 1
        else:
            reference.sort()
            expected = reference.pop(0) if reference else None
            got = ready.pop()
            assert got == (None if expected is None else (expected[1], f"h{expected[1]}"))
        assert len(ready) == len(reference)
    assert len(ready._queues) <= 5  # one queue per priority level in use, at most


def _kept_full(ready: ReadyHosts, levels: list[int], pops: int) -> list[int]:
    """Pop ``pops`` times, pushing a new entry of the popped priority after each pop
    (every level always has a ready host); the priorities in pop order."""
    token = 0
    for priority in levels:
        for _ in range(3):
            ready.push(priority, token, f"p{priority}")
            token += 1
    order = []
    for _ in range(pops):
        entry = ready.pop()
        assert entry is not None
        priority = int(entry[1][1:])
        order.append(priority)
        ready.push(priority, token, f"p{priority}")
        token += 1
    return order


def test_turns_give_each_lower_priority_its_share() -> None:
    assert TURN_EVERY == 20  # the share docs/design.md and the module docstring state
    rounds = 100
    order = _kept_full(ReadyHosts(), [0, 5, 9], TURN_EVERY * 2 * rounds)
    counts = collections.Counter(order)
    # the best gets 19 of every 20; the two lower ones one in 40 each, in turn
    assert counts == {9: (TURN_EVERY - 1) * 2 * rounds, 5: rounds, 0: rounds}
    turns = [p for i, p in enumerate(order) if (i + 1) % TURN_EVERY == 0]
    assert turns == [5, 0] * rounds  # highest lower priority first, then round again
    assert all(p == 9 for i, p in enumerate(order) if (i + 1) % TURN_EVERY)


def test_strict_priority_starves_the_lower_ones_while_the_best_has_hosts() -> None:
    # the red-check of the shares: what ReadyHosts did before the turns
    order = _kept_full(ReadyHosts(turn_every=None), [0, 5, 9], 1000)
    assert set(order) == {9}


def test_no_ready_priority_waits_longer_than_its_bound_under_random_traffic() -> None:
    rng = random.Random(11)
    priorities = [0, 1, 2, 5, 10, 104]
    ready = ReadyHosts()
    queued: dict[int, collections.deque[int]] = {p: collections.deque() for p in priorities}
    head_wait = dict.fromkeys(priorities, 0)  # pops since the level's head became its head
    token, worst = 0, 0
    for _ in range(40_000):
        if rng.random() < 0.5 or not len(ready):
            priority = rng.choice(priorities)
            ready.push(priority, token, str(priority))
            if not queued[priority]:
                head_wait[priority] = 0
            queued[priority].append(token)
            token += 1
            continue
        entry = ready.pop()
        assert entry is not None
        got, priority = entry[0], int(entry[1])
        assert queued[priority].popleft() == got  # arrival order within a priority
        head_wait[priority] = -1
        for level, tokens in queued.items():
            if tokens:
                head_wait[level] += 1
                worst = max(worst, head_wait[level])
    # every ready level is served within a turn for each other level (a turn every
    # TURN_EVERY) however the levels come and go
    assert worst <= TURN_EVERY * (len(priorities) - 1)
    assert worst > 2 * TURN_EVERY  # the traffic did keep lower levels waiting behind the best
    assert len(ready._queues) <= len(priorities)


def test_a_turn_skips_emptied_levels_and_goes_to_the_best_when_none_is_lower() -> None:
    ready = ReadyHosts(turn_every=4)
    for token in range(20):
        ready.push(7, token, "best")
    ready.push(3, 100, "low")
    taken = [ready.pop() for _ in range(8)]
    # the 4th is the low host's turn; at the 8th no lower priority is ready: the best's
    assert taken[3] == (100, "low")
    assert [t for i, t in enumerate(taken) if i != 3] == [(t, "best") for t in range(7)]
    assert list(ready._queues) == [7]  # the emptied level is gone


def test_equal_priorities_stay_in_arrival_order_with_turns() -> None:
    ready = ReadyHosts(turn_every=2)
    for token in range(10):
        ready.push(1, token, f"low{token}")
        ready.push(8, 100 + token, f"high{token}")
    order = [ready.pop() for _ in range(20)]
    assert ready.pop() is None
    low = [e for e in order if e is not None and e[1].startswith("low")]
    high = [e for e in order if e is not None and e[1].startswith("high")]
    assert low == [(t, f"low{t}") for t in range(10)]
    assert high == [(100 + t, f"high{t}") for t in range(10)]


def test_a_stale_entry_skipped_does_not_use_up_a_turn() -> None:
    ready = ReadyHosts(turn_every=3)
    for token in range(10):
        ready.push(9, token, "best")
    ready.push(2, 50, "stale")
    ready.push(2, 51, "live")
    assert [ready.pop() for _ in range(2)] == [(0, "best"), (1, "best")]
    assert ready.pop() == (50, "stale")  # the turn, spent on an entry the caller skips
    ready.skipped()
    assert ready.pop() == (51, "live")  # so the turn is taken again
    assert [ready.pop() for _ in range(2)] == [(2, "best"), (3, "best")]


def test_turn_every_below_two_is_refused() -> None:
    with pytest.raises(ValueError, match="turn_every"):
        ReadyHosts(turn_every=1)


def test_stale_entries_of_the_best_priority_do_not_bring_the_turn_sooner() -> None:
    ready = ReadyHosts(turn_every=3)
    for token in range(10):
        ready.push(9, token, "best")
    ready.push(2, 50, "low")
    live = []
    for _ in range(6):
        entry = ready.pop()
        assert entry is not None
        if entry[0] % 2:  # odd tokens: hosts rescheduled since (stale)
            ready.skipped()
        else:
            live.append(entry)
    # two live grants of the best, then the low one's turn: the stale ones did not count
    assert live[:3] == [(0, "best"), (2, "best"), (50, "low")]
