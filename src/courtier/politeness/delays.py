"""Delay arithmetic for one host: configured delay, Crawl-delay, adaptive delay, back-off,
and the AIMD throttle.

The **throttle** lowers a host's allowed rate for longer than a back-off lasts
when it says it is overloaded (429 or 503): each such answer multiplies the
allowed rate by ``throttle_decrease`` (halves it: the delay doubles, starting
from the delay in force, at least ``throttle_floor``), and each later success
adds ``throttle_increase`` × the base rate back (additive increase), until the
rate is the base rate again — the base being the configured (or per-host) delay
and Crawl-delay, which the throttle never undercuts. It is capped at
``throttle_max_delay``. The back-off (a pause of the whole host) still applies
on top.

Pure functions and a small slotted state object; no clock reads. Callers pass
``now`` from their :class:`~courtier.core.clock.Clock`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

#: with no configured delay, recovery steps are counted against this gap (20 req/s)
MIN_RATE_UNIT = 0.05


@dataclass(frozen=True, slots=True)
class DelayPolicy:
    """Crawl-wide politeness settings (per-host overrides replace ``delay``)."""

    delay: float = 1.0                 # minimum gap between request starts to one host
    adaptive_factor: float = 5.0       # adaptive delay = factor × recent fetch duration
    max_adaptive_delay: float = 30.0   # adaptive delay never exceeds this
    adaptive_recovery: float = 0.3     # weight of a new sample (EWMA); lower = slower recovery
    backoff_base: float = 5.0          # first back-off after a 5xx/429/network error
    backoff_max: float = 3600.0        # back-off never exceeds this
    backoff_jitter: float = 0.25       # ± fraction of random jitter
    throttle_decrease: float = 0.5     # allowed rate × this on a 429/503 (delay doubles)
    throttle_increase: float = 0.05    # + this × base rate per success (20 successes per halving)
    throttle_floor: float = 1.0        # a throttle starts from at least this delay
    throttle_max_delay: float = 600.0  # the throttle never asks for more than this


@dataclass(slots=True)
class HostTiming:
    """Mutable timing state of one host; owned by the shard owner's frontier only."""

    adaptive_delay: float = 0.0
    failures: int = 0
    backoff_until: float = 0.0
    throttle_delay: float = 0.0   # AIMD: the gap the host's reduced rate asks for (0: none)
    throttle_events: int = 0      # 429/503 answers that lowered the rate (since start)

    def throttle(self, delay_in_force: float, policy: DelayPolicy) -> float:
        """A 429 or 503: multiply the allowed rate by ``throttle_decrease`` (the delay grows
        from the larger of the delay in force and the current throttle); return it."""
        start = max(self.throttle_delay, delay_in_force, policy.throttle_floor)
        factor = policy.throttle_decrease if 0 < policy.throttle_decrease < 1 else 0.5
        self.throttle_delay = min(policy.throttle_max_delay, start / factor)
        self.throttle_events += 1
        return self.throttle_delay

    def recover(self, base_delay: float, policy: DelayPolicy) -> None:
        """A success: add ``throttle_increase`` × the base rate to the allowed rate; the
        throttle ends once it is no slower than ``base_delay`` (configured / Crawl-delay)."""
        if self.throttle_delay <= 0:
            return
        base = max(base_delay, MIN_RATE_UNIT)
        rate = 1.0 / self.throttle_delay + policy.throttle_increase / base
        self.throttle_delay = 1.0 / rate
        if self.throttle_delay <= base * (1 + 1e-9):
            self.throttle_delay = 0.0  # back at the base rate: the throttle is over

    def record_success(self, elapsed: float, policy: DelayPolicy) -> None:
        """A response arrived in ``elapsed`` seconds: update the adaptive delay, clear failures."""
        # min(max_adaptive_delay, factor × max(0.0, elapsed)), without the builtins' calls
        # (once per fetch); the same values, NaN included
        sample = policy.adaptive_factor * (elapsed if elapsed > 0.0 else 0.0)
        if not sample < policy.max_adaptive_delay:
            sample = policy.max_adaptive_delay
        if sample >= self.adaptive_delay:
            # grow at once when the host slows down
            self.adaptive_delay = sample
        else:
            # recover slowly when it is fast again
            w = policy.adaptive_recovery
            self.adaptive_delay = (1 - w) * self.adaptive_delay + w * sample
        self.failures = 0

    def record_failure(
        self,
        now: float,
        policy: DelayPolicy,
        rng: random.Random,
        retry_at: float | None = None,
    ) -> float:
        """A 429/503/5xx/timeout/connection error: pause the whole host; return backoff_until.

        ``retry_at`` (from Retry-After) is obeyed when given; otherwise
        exponential back-off with jitter, capped at ``backoff_max``.
        """
        self.failures += 1
        if retry_at is not None and retry_at > now:
            until = retry_at
        else:
            step = policy.backoff_base * (2 ** min(self.failures - 1, 20))
            step = min(policy.backoff_max, step)
            jitter = 1.0 + policy.backoff_jitter * (2 * rng.random() - 1)
            until = now + step * jitter
        self.backoff_until = max(self.backoff_until, until)
        return self.backoff_until


def base_delay(
    policy: DelayPolicy, crawl_delay: float | None, override_delay: float | None = None
) -> float:
    """The gap asked for by configuration: max(configured or per-host delay, Crawl-delay)."""
    base = policy.delay if override_delay is None else override_delay
    asked = crawl_delay or 0.0
    return asked if asked > base else base  # max(), without the builtin's call (per grant)


def effective_delay(
    policy: DelayPolicy,
    timing: HostTiming,
    crawl_delay: float | None,
    override_delay: float | None = None,
) -> float:
    """The gap in force between two request starts:
    max(configured, Crawl-delay, adaptive, throttle)."""
    delay = base_delay(policy, crawl_delay, override_delay)
    if timing.adaptive_delay > delay:
        delay = timing.adaptive_delay
    if timing.throttle_delay > delay:
        delay = timing.throttle_delay
    return delay


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Absolute POSIX time a Retry-After header asks to wait until, or None if invalid.

    Accepts delta-seconds (non-negative integer) and HTTP-date in all three
    formats (IMF-fixdate, RFC 850, asctime). Negative, fractional or garbage
    values give None (the caller falls back to exponential back-off).
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if text.isdigit():
        return now + int(text)
    if text[0] in "+-" or text.replace(".", "", 1).isdigit():
        return None
    try:
        parsed = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    return max(now, parsed.timestamp())
