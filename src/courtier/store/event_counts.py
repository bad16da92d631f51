"""Crawl-wide tallies of the event outbox, kept by the stores at write time.

``courtier stats`` reports how many events the outbox holds, their outcomes
and the status mix of their responses. Folding the outbox for that decodes
every payload (each fetch event carries its page's links), so the stores keep
these counters instead: every insert into the outbox adds the names of
:func:`counter_names` in the same transaction, so the counters are exact
after a crash as well (an insert and its counts commit or roll back together).

Counter names are ``events``, ``outcome:<outcome>`` and ``status:<class>``;
:func:`status_class_of` gives the class (``2xx`` … or ``error``). An event
whose outcome is ``robots_denied`` or ``blocked`` had no response and has no
status class.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: outcomes without a response: they count no status class
NO_RESPONSE_OUTCOMES = ("robots_denied", "blocked")
EVENTS = "events"
OUTCOME_PREFIX = "outcome:"
STATUS_PREFIX = "status:"


def status_class_of(status: Any) -> str:
    """``"2xx"`` … ``"5xx"`` for an HTTP status, ``"error"`` for none."""
    return f"{status // 100}xx" if isinstance(status, int) and status > 0 else "error"


def counter_names(outcome: Any, status: Any) -> tuple[str, ...]:
    """The counters one event adds 1 to, from its payload's ``outcome`` and ``status``."""
    text = str(outcome)
    if text in NO_RESPONSE_OUTCOMES:
        return EVENTS, OUTCOME_PREFIX + text
    return EVENTS, OUTCOME_PREFIX + text, STATUS_PREFIX + status_class_of(status)


def payload_counter_names(payload: Mapping[str, Any]) -> tuple[str, ...]:
    return counter_names(payload.get("outcome"), payload.get("status"))


def tally(names: Iterable[tuple[str, ...]]) -> Counter[str]:
    """Sum the counter names of many events."""
    total: Counter[str] = Counter()
    for event_names in names:
        total.update(event_names)
    return total


@dataclass(frozen=True, slots=True)
class EventCounts:
    """The outbox's tallies: events, events per outcome, responses per status class."""

    events: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    status_mix: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_counters(cls, rows: Iterable[tuple[str, int]]) -> EventCounts:
        """From ``(name, count)`` rows; a name may repeat (the counts add up), zeros drop."""
        events = 0
        outcomes: Counter[str] = Counter()
        status_mix: Counter[str] = Counter()
        for name, count in rows:
            if name == EVENTS:
                events += int(count)
            elif name.startswith(OUTCOME_PREFIX):
                outcomes[name[len(OUTCOME_PREFIX):]] += int(count)
            elif name.startswith(STATUS_PREFIX):
                status_mix[name[len(STATUS_PREFIX):]] += int(count)
        return cls(events, {k: v for k, v in outcomes.items() if v},
                   {k: v for k, v in status_mix.items() if v})

    @classmethod
    def of_payloads(cls, payloads: Iterable[Mapping[str, Any]]) -> EventCounts:
        """A recount from event payloads (the reference the stored counters must equal)."""
        return cls.from_counters(tally(payload_counter_names(p) for p in payloads).items())
