"""Saving a host's politeness clock on the old owner and restoring it on the new one.

Times: the old owner's clock is the store's minus 1000 s, the new owner's plus 4000 s
(``store = local + offset``), so a restore that forgets a conversion lands thousands of
seconds off. Seen red on a scratch copy: with ``restore_clock`` ignoring
``next_start_at`` (a graceful move then started at once),
``test_a_graceful_move_continues_the_saved_clock`` and
``test_the_saved_clock_is_never_shortened_by_the_restorer_s_own_arithmetic`` failed; with
``clock_of`` saving ``next_allowed_at`` without the offset, the round trip failed.
"""

from __future__ import annotations

from dataclasses import replace

from courtier.cluster.host_clocks import clock_of, restore_clock
from courtier.frontier.host import HostState
from courtier.store.cluster import HostClock

OLD_OFFSET = 1000.0   # store − old owner's local clock
NEW_OFFSET = -4000.0  # store − new owner's local clock
ERROR = 0.05          # the new owner's offset error
DELAY = 3.0


def _host(next_allowed_at: float = 0.0) -> HostState:
    host = HostState(host_key="http://a.test", shard=7)
    host.next_allowed_at = next_allowed_at
    return host


def _restore(clock: HostClock | None, *, gained_at: float = 100.0, taken_over: bool = False,
             registered_wait: float = 0.0, delay: float = DELAY) -> HostState:
    host = _host(registered_wait)
    restore_clock(host, clock, NEW_OFFSET, ERROR, gained_at, taken_over, delay)
    return host


def test_the_saved_clock_is_in_store_time() -> None:
    host = _host(next_allowed_at=50.0)
    host.in_flight = 1
    host.robots_in_flight = True
    clock = clock_of(host, DELAY, OLD_OFFSET)
    assert clock.next_start_at == 1050.0
    assert clock.delay_in_force == DELAY
    assert clock.in_flight == 2          # the robots.txt request counts as open too
    assert clock.backoff_until is None   # none in force
    # saved under the host name: every scheme and port of it shares the clock
    assert (clock.host_key, clock.shard) == ("a.test", 7)


def test_a_back_off_longer_than_the_delay_is_the_next_start() -> None:
    host = _host(next_allowed_at=50.0)
    host.timing.backoff_until = 80.0
    clock = clock_of(host, DELAY, OLD_OFFSET)
    assert clock.next_start_at == 1080.0
    assert clock.backoff_until == 1080.0


def test_a_host_never_fetched_saves_no_next_start() -> None:
    assert clock_of(_host(), DELAY, OLD_OFFSET).next_start_at is None


def test_a_graceful_move_continues_the_saved_clock() -> None:
    """The old owner's last request ended at its local 47 (next start 50); on the new
    owner's clock that is 50 + 1000 + 4000 = 5050, plus the offset error."""
    saved = clock_of(_host(next_allowed_at=50.0), DELAY, OLD_OFFSET)
    # the new owner registered the host with its "unknown past" wait (now + delay); an
    # exact clock of a graceful move replaces it
    host = _restore(saved, registered_wait=5100.0)
    assert host.next_allowed_at == 5050.0 + ERROR


def test_the_saved_clock_is_never_shortened_by_the_restorer_s_own_arithmetic() -> None:
    """The new owner gained the shard right after the old owner's last request: it must
    wait for the saved next start, not for its own (empty) idea of the host."""
    saved = clock_of(_host(next_allowed_at=50.0), DELAY, OLD_OFFSET)
    gained_at = 50.0 + OLD_OFFSET - NEW_OFFSET - 2.5  # 2.5 s before the saved next start
    host = _restore(saved, gained_at=gained_at)
    assert host.next_allowed_at >= gained_at + 2.5


def test_without_a_saved_clock_the_registration_wait_stays() -> None:
    host = _restore(None, registered_wait=123.0)
    assert host.next_allowed_at == 123.0


def test_a_takeover_waits_one_delay_from_the_gain_whatever_was_saved() -> None:
    saved = clock_of(_host(next_allowed_at=50.0), DELAY, OLD_OFFSET)
    host = _restore(saved, gained_at=6000.0, taken_over=True)  # the saved next start: 5050
    assert host.next_allowed_at == 6000.0 + DELAY


def test_the_longer_of_the_saved_and_own_delay_counts_after_a_takeover() -> None:
    saved = clock_of(_host(next_allowed_at=50.0), 10.0, OLD_OFFSET)
    host = _restore(saved, gained_at=6000.0, taken_over=True, delay=2.0)
    assert host.next_allowed_at == 6010.0


def test_a_clock_saved_with_requests_open_waits_a_delay_past_the_save() -> None:
    host = _host(next_allowed_at=50.0)
    host.in_flight = 1
    saved = replace(clock_of(host, DELAY, OLD_OFFSET), saved_at=1049.0)  # stamped by the store
    restored = _restore(saved, registered_wait=5040.0)
    # the open request may have ended at the save: its end + delay, not the saved next start
    assert restored.next_allowed_at == 1049.0 - NEW_OFFSET + ERROR + DELAY
    # and the registration wait is not replaced (the clock is not exact)
    late = _restore(saved, registered_wait=5100.0)
    assert late.next_allowed_at == 5100.0


def test_back_off_and_throttle_continue_and_only_grow() -> None:
    old = _host(next_allowed_at=50.0)
    old.timing.backoff_until = 70.0
    old.timing.throttle_delay = 8.0
    old.timing.throttle_events = 3
    old.timing.adaptive_delay = 1.5
    old.timing.failures = 2
    saved = clock_of(old, DELAY, OLD_OFFSET)
    host = _host()
    host.timing.throttle_delay = 12.0  # already slower here: kept
    restore_clock(host, saved, NEW_OFFSET, ERROR, 0.0, False, DELAY)
    timing = host.timing
    assert timing.backoff_until == 70.0 + OLD_OFFSET - NEW_OFFSET + ERROR
    assert (timing.throttle_delay, timing.throttle_events) == (12.0, 3)
    assert (timing.adaptive_delay, timing.failures) == (1.5, 2)
    assert host.next_allowed_at == 70.0 + OLD_OFFSET - NEW_OFFSET + ERROR
