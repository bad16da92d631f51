"""The fetch tasks under way (crawl/in_flight.py): a task held far past every bound of a
fetch is named once, with where it waits (the one-worker PostgreSQL crawl whose 58
hosts got no request for 13 minutes left no trace of where their fetches were)."""

from __future__ import annotations

import asyncio

from courtier.core.clock import VirtualClock
from courtier.crawl.in_flight import InFlight
from courtier.frontier.lease import Lease, LeaseKind


def _lease(host: str) -> Lease:
    return Lease(LeaseKind.ROBOTS, host, f"{host}/robots.txt", issued_at=0.0, epoch=1, delay=0.0)


async def _held(gate: asyncio.Event) -> None:
    await _inner(gate)


async def _inner(gate: asyncio.Event) -> None:
    await gate.wait()


async def _quick() -> None:
    return None


async def test_a_fetch_held_past_the_bound_is_named_once_with_where_it_waits() -> None:
    """Seen red with ``overdue`` naming a task at every call (the ``_named`` check
    removed): the second look named it again."""
    clock = VirtualClock(1000.0)
    in_flight = InFlight(lambda: None, clock)
    gate = asyncio.Event()
    in_flight.start(_lease("http://held.test"), _held(gate))
    in_flight.start(_lease("http://quick.test"), _quick())
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the quick one has ended
    assert len(in_flight) == 1
    assert in_flight.overdue(clock.now() + 99.0, 100.0) == []  # not yet
    [(lease, seconds, answered, where)] = in_flight.overdue(clock.now() + 100.0, 100.0)
    assert (lease.host_key, seconds, answered) == ("http://held.test", 100.0, False)
    assert where.startswith("_held:") and " > _inner:" in where and "wait:" in where
    assert in_flight.overdue(clock.now() + 500.0, 100.0) == []  # named once
    gate.set()
    await in_flight.settle()
    assert not in_flight and in_flight.overdue(clock.now() + 500.0, 100.0) == []
