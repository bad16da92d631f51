"""ReadyHosts: best priority first, arrival order within a priority, empty levels go."""

from __future__ import annotations

import random

from courtier.frontier.ready import ReadyHosts


def test_priority_then_arrival_order() -> None:
    ready = ReadyHosts()
    assert ready.pop() is None and len(ready) == 0
    for token, (priority, key) in enumerate([(0, "a"), (5, "b"), (0, "c"), (5, "d"), (9, "e")]):
        ready.push(priority, token, key)
    assert len(ready) == 5
    assert [ready.pop() for _ in range(5)] == [(4, "e"), (1, "b"), (3, "d"), (0, "a"), (2, "c")]
    assert ready.pop() is None and len(ready) == 0


def test_matches_a_sorted_reference_when_pushes_and_pops_interleave() -> None:
    rng = random.Random(5)
    ready, reference = ReadyHosts(), []
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
