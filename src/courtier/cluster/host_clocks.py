"""A server's politeness clock across a shard move: what the old owner saves, what the new
owner restores. The clock is the host name's (every scheme and port of it shares one:
frontier/host.py ``ServerClock``), saved under that name; any of its hosts stands for it.

Pure: times are passed in; the store clock and the worker's clock differ by an
offset the coordinator measures (``store = local + offset``, known to within
``error`` seconds, half the round trip it was measured over).

The rule the restore keeps: **the gap the server sees across a move is never
shorter than the delay in force.** So the restorer never starts before the saved
``next_start_at`` (converted, plus the offset error); after a *takeover* (the old
owner died, its last request is unknown) and for a clock saved while requests were
still open, it also waits one full ``delay_in_force`` from the moment it gained
the shard (resp. from the save). Back-off, Retry-After, the AIMD throttle and the
adaptive delay continue as they were (each only ever made *longer* by a restore).
"""

from __future__ import annotations

from courtier.frontier.host import HostState
from courtier.store.cluster import HostClock

__all__ = ["clock_of", "restore_clock"]


def clock_of(host: HostState, delay_in_force: float, offset: float) -> HostClock:
    """The clock of ``host``'s server to save under its host name, in store time
    (``offset`` = store − local)."""
    timing = host.timing
    next_start = max(host.next_allowed_at, timing.backoff_until)
    backoff = timing.backoff_until if timing.backoff_until > 0 else None
    return HostClock(
        host_key=host.server.name,
        shard=host.shard,
        next_start_at=next_start + offset if next_start > 0 else None,
        delay_in_force=delay_in_force,
        adaptive_delay=timing.adaptive_delay,
        throttle_delay=timing.throttle_delay,
        throttle_events=timing.throttle_events,
        failures=timing.failures,
        backoff_until=backoff + offset if backoff is not None else None,
        in_flight=host.in_flight + (1 if host.robots_in_flight else 0),
    )


def restore_clock(
    host: HostState,
    clock: HostClock | None,
    offset: float,
    error: float,
    gained_at: float,
    taken_over: bool,
    delay_in_force: float,
) -> None:
    """Continue ``host``'s politeness clock on its new owner (local times).

    ``gained_at`` is when this worker gained the shard (local clock);
    ``taken_over``: from an owner whose lease expired (a crash or a partition).
    ``delay_in_force`` is the restorer's own delay for the host; the larger of it
    and the saved one counts. After a takeover, one delay from ``gained_at`` is
    waited whatever was saved (the dead owner's last request is unknown).
    """
    timing = host.timing
    delay = delay_in_force
    exact = clock is not None and not taken_over and clock.in_flight == 0
    # a graceful move with a complete clock replaces the "unknown past" wait that
    # register_host applies to any host with a stored record; otherwise both count
    at = 0.0 if exact else host.next_allowed_at
    if clock is not None:
        delay = max(delay, clock.delay_in_force)
        if clock.next_start_at is not None:
            at = max(at, clock.next_start_at - offset + error)
        if clock.in_flight > 0 and clock.saved_at > 0:
            at = max(at, clock.saved_at - offset + error + delay)
        timing.adaptive_delay = max(timing.adaptive_delay, clock.adaptive_delay)
        timing.throttle_delay = max(timing.throttle_delay, clock.throttle_delay)
        timing.throttle_events = max(timing.throttle_events, clock.throttle_events)
        timing.failures = max(timing.failures, clock.failures)
        for until in (clock.backoff_until, clock.retry_after_until):
            if until is not None:
                timing.backoff_until = max(timing.backoff_until, until - offset + error)
    if taken_over:
        at = max(at, gained_at + delay)
    host.next_allowed_at = at
