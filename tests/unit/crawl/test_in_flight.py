"""The fetch tasks under way (crawl/in_flight.py): a task held far past every bound of a
fetch is named once, with where it waits (the one-worker PostgreSQL crawl whose 58
hosts got no request for 13 minutes left no trace of where their fetches were); a task
cancelled before its first step has its lease given back (that crawl's 58 hosts)."""

from __future__ import annotations

import asyncio

from courtier.core.clock import VirtualClock
from courtier.crawl.in_flight import InFlight
from courtier.frontier.lease import Lease, LeaseKind


def _lease(host: str) -> Lease:
    return Lease(LeaseKind.ROBOTS, host, f"{host}/robots.txt", issued_at=0.0, epoch=1, delay=0.0)


async def _held(_: Lease, gate: asyncio.Event) -> None:
    await _inner(gate)


async def _inner(gate: asyncio.Event) -> None:
    await gate.wait()


async def _quick(_: Lease) -> None:
    return None


async def test_a_fetch_held_past_the_bound_is_named_once_with_where_it_waits() -> None:
    """Seen red with ``overdue`` naming a task at every call (the ``_named`` check
    removed): the second look named it again."""
    clock = VirtualClock(1000.0)
    in_flight = InFlight(lambda: None, clock)
    gate = asyncio.Event()
    in_flight.start(_lease("http://held.test"), lambda lease: _held(lease, gate))
    in_flight.start(_lease("http://quick.test"), _quick)
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the quick one has ended
    assert len(in_flight) == 1
    assert in_flight.overdue(clock.now() + 99.0, 100.0) == []  # not yet
    [(lease, seconds, answered, where)] = in_flight.overdue(clock.now() + 100.0, 100.0)
    assert (lease.host_key, seconds, answered) == ("http://held.test", 100.0, False)
    assert where.startswith("_begin:") and " > _held:" in where and " > _inner:" in where
    assert "wait:" in where
    assert in_flight.overdue(clock.now() + 500.0, 100.0) == []  # named once
    gate.set()
    await in_flight.settle()
    assert not in_flight and in_flight.overdue(clock.now() + 500.0, 100.0) == []


async def test_a_task_cancelled_before_its_first_step_gives_its_lease_back() -> None:
    """A fence (a timer uvloop runs before the first step of the tasks the turn that held
    the loop started) or a lost shard in the same turn cancels a fetch whose coroutine never
    ran: its own give-back never runs either. Seen red without the give-back in ``_done``
    (nothing given back: the host stayed in flight in the frontier for ever)."""
    given_back: list[str] = []
    ran: list[str] = []

    async def fetch(lease: Lease) -> None:
        ran.append(lease.host_key)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            given_back.append(f"{lease.host_key} by the fetch")
            raise

    in_flight = InFlight(lambda: None, VirtualClock(1000.0),
                         lambda lease: given_back.append(lease.host_key))
    in_flight.start(_lease("http://begun.test"), fetch)
    await asyncio.sleep(0)  # its first step: the fetch runs
    in_flight.start(_lease("http://unbegun.test"), fetch)
    assert in_flight.cancel_unanswered() == 2  # before the second one's first step
    await in_flight.settle()
    assert ran == ["http://begun.test"]
    assert sorted(given_back) == ["http://begun.test by the fetch", "http://unbegun.test"]
    assert not in_flight


class _CountingNow(float):
    """A time that counts the subtractions made from it (one a task looked at)."""

    looks = 0

    def __sub__(self, other: float) -> float:
        _CountingNow.looks += 1
        return float(self) - other


async def test_a_turn_looks_at_the_oldest_unnamed_fetches_only() -> None:
    """The worker asks every turn of its loop: with thousands of fetches under way, none
    overdue, one look; overdue ones are named once each, oldest first, and a fetch that
    ends before it is named is never named. Seen red with ``overdue`` walking every task
    (main's): "assert 2000 <= 2" (every fetch looked at each turn)."""
    clock = VirtualClock(1000.0)
    in_flight = InFlight(lambda: None, clock)
    gates = []
    for i in range(2000):
        gate = asyncio.Event()
        gates.append(gate)
        in_flight.start(_lease(f"http://h{i}.test"), lambda lease, g=gate: _held(lease, g))
        clock.advance(0.01)  # each one starts a little later
    await asyncio.sleep(0)
    _CountingNow.looks = 0
    assert in_flight.overdue(_CountingNow(clock.now()), 100.0) == []
    assert _CountingNow.looks <= 2
    gates[1].set()  # the second one ends before it is overdue
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert len(in_flight) == 1999
    named = in_flight.overdue(1000.0 + 100.035, 100.0)  # the first four started by then
    assert [lease.host_key for lease, *_ in named] == [
        "http://h0.test", "http://h2.test", "http://h3.test"]
    _CountingNow.looks = 0
    assert in_flight.overdue(_CountingNow(1000.0 + 100.035), 100.0) == []  # named once
    assert _CountingNow.looks <= 2
    assert [lease.host_key for lease, *_ in in_flight.overdue(1000.0 + 100.045, 100.0)] == [
        "http://h4.test"]
    for gate in gates:
        gate.set()
    await in_flight.settle()
    assert not in_flight
