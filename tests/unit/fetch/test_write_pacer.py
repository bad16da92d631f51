"""AddressPacer: the last per-address gap, kept when a request is written."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from courtier.core.clock import VirtualClock
from courtier.fetch import write_pacer
from courtier.fetch.write_pacer import AddressPacer


async def test_first_write_to_an_address_goes_at_once() -> None:
    clock = VirtualClock()
    start = clock.now()
    pacer = AddressPacer(clock, 0.3)
    await pacer.wait_turn("10.0.0.1")
    await pacer.wait_turn("10.0.0.2")  # another address: its own turn
    assert clock.now() == start
    assert pacer.waits == 0


async def test_next_write_waits_until_the_gap_has_passed() -> None:
    """Seen red with wait_turn returning at once: the second write went 0 s after."""
    clock = VirtualClock()
    pacer = AddressPacer(clock, 0.3)
    await pacer.wait_turn("10.0.0.1")
    first = clock.now()
    clock.advance(0.1)
    await pacer.wait_turn("10.0.0.1")
    assert clock.now() - first == pytest.approx(0.3)
    assert pacer.waits == 1
    clock.advance(1.0)  # long after: no wait
    before = clock.now()
    await pacer.wait_turn("10.0.0.1")
    assert clock.now() == before


async def test_concurrent_waiters_each_get_their_own_turn() -> None:
    """Three requests to one address asked for at the same moment are written 0.3 s
    apart (seen red with the address noted before the wait instead of after it: two of
    them went together)."""
    clock = VirtualClock()
    pacer = AddressPacer(clock, 0.3)
    written: list[float] = []

    async def write() -> None:
        await pacer.wait_turn("10.0.0.1")
        written.append(clock.now())

    await asyncio.gather(write(), write(), write())
    assert len(written) == 3
    gaps = [b - a for a, b in itertools.pairwise(written)]
    assert all(gap >= 0.3 - 1e-6 for gap in gaps), gaps


async def test_old_addresses_are_swept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(write_pacer, "SWEEP_EVERY", 4)
    clock = VirtualClock()
    pacer = AddressPacer(clock, 0.3)
    for n in range(3):
        await pacer.wait_turn(f"10.0.0.{n}")
    clock.advance(1.0)
    await pacer.wait_turn("10.0.1.1")  # the 4th note sweeps the three stale ones
    assert len(pacer) == 1


def test_a_gap_must_be_positive() -> None:
    with pytest.raises(ValueError, match="> 0"):
        AddressPacer(VirtualClock(), 0.0)
