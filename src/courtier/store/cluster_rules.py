"""Pure rules of the cluster contract shared by the memory and SQLite stores (the
PostgreSQL store states the same rules in SQL, migration 0007): one place says what
an acquisition does to an epoch, which window a day count goes into, and when an IP
slot is granted."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from courtier.core.errors import StoreError
from courtier.core.records import DAY
from courtier.store.cluster import SCOPE_KINDS, DayReservation, ScopeRule


@dataclass(frozen=True, slots=True)
class AcquireStep:
    """What acquiring one shard does: ``epoch`` the term's epoch; ``new_term`` whether
    ``acquired_at`` restarts; ``handover`` the counter to bump ("graceful", "takeover")."""

    epoch: int
    new_term: bool
    handover: str | None


def acquire_step(me: str, owner: str | None, epoch: int, expires_at: float,
                 last_owner: str | None, now: float) -> AcquireStep | None:
    """The acquisition of a shard by ``me`` given its lease row (None: refused)."""
    if owner == me:
        return AcquireStep(epoch, False, None)           # ours: the term goes on
    if owner is None:                                    # free: a release already bumped it
        moved = last_owner is not None and last_owner != me
        return AcquireStep(max(epoch, 1), True, "graceful" if moved else None)
    if expires_at <= now:                                # expired in another's hands
        return AcquireStep(epoch + 1, True, "takeover")
    return None                                          # another owner holds it


def day_window(ask: DayReservation, stored: tuple[float, int] | None) -> tuple[float, int]:
    """The (day_start, used) a reservation counts in, given the stored window."""
    if stored is None or ask.day_start >= stored[0] + DAY:
        return ask.day_start, 0
    return stored


def day_grant(ask: DayReservation, used: int) -> int:
    """How many of ``ask.n`` fetches a window with ``used`` so far grants (a negative n is
    given back in full, never taking the count below 0)."""
    if ask.n < 0:
        return max(ask.n, -used)
    if ask.limit is None:
        return ask.n
    return max(0, min(ask.n, ask.limit - used))


def ip_retry_at(next_allowed_at: float, expiries: Sequence[float], max_concurrent: int,
                now: float) -> float | None:
    """None when a slot may be granted now (fewer than ``max_concurrent`` live slots, and
    the gap since the last grant has passed); else the earliest time to ask again."""
    cap = max(1, max_concurrent)
    if len(expiries) < cap and now >= next_allowed_at:
        return None
    retry = next_allowed_at
    if len(expiries) >= cap:
        retry = max(retry, min(expiries))
    return retry


def check_scope_kinds(rules: Sequence[ScopeRule]) -> None:
    """StoreError for a rule of an unknown kind or an include/exclude that is no regex."""
    for rule in rules:
        if rule.kind not in SCOPE_KINDS:
            raise StoreError(f"unknown scope rule kind {rule.kind!r} (one of "
                             f"{', '.join(SCOPE_KINDS)})")
        if rule.kind in ("include", "exclude"):
            try:
                re.compile(rule.value)
            except re.error as exc:
                raise StoreError(f"scope rule {rule.kind} {rule.value!r} is not a regular "
                                 f"expression: {exc}") from None
