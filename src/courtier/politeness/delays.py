"""Delay arithmetic for one host: configured delay, Crawl-delay, adaptive delay, back-off.

Pure functions and a small slotted state object; no clock reads. Callers pass
``now`` from their :class:`~courtier.clock.Clock`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from email.utils import parsedate_to_datetime


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


@dataclass(slots=True)
class HostTiming:
    """Mutable timing state of one host; owned by the shard owner's frontier only."""

    adaptive_delay: float = 0.0
    failures: int = 0
    backoff_until: float = 0.0

    def record_success(self, elapsed: float, policy: DelayPolicy) -> None:
        """A response arrived in ``elapsed`` seconds: update the adaptive delay, clear failures."""
        sample = min(policy.max_adaptive_delay, policy.adaptive_factor * max(0.0, elapsed))
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


def effective_delay(
    policy: DelayPolicy,
    timing: HostTiming,
    crawl_delay: float | None,
    override_delay: float | None = None,
) -> float:
    """The gap in force between two request starts: max(configured, Crawl-delay, adaptive)."""
    base = policy.delay if override_delay is None else override_delay
    return max(base, crawl_delay or 0.0, timing.adaptive_delay)


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
