"""Robots decisions taken in turns, so that no robots.txt holds the event loop.

A decision is usually a few dictionary probes. A hostile robots.txt (500 KiB of
``*`` rules) can make one cost tens of milliseconds, and the frontier decides
the URLs of a host one after another while it looks for the next fetch. The
work is therefore counted (:class:`~courtier.politeness.robots_match.PathCheck`
units) against a budget per *turn* — one run of ``Frontier.next_lease`` calls
up to the one returning None, after which the worker yields to the loop. A
decision that does not finish within the turn keeps its place on the host and
goes on next turn; its URL stays at the head of the host's queue meanwhile
(nothing is lost on shutdown or release).

Pure: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from courtier.core.records import DueUrl
from courtier.frontier.host import HostState
from courtier.politeness.robots import RobotsTxt
from courtier.politeness.robots_match import PathCheck

#: work units of robots decisions per turn (a few milliseconds at worst; the
#: largest robots.txt of ordinary sites takes a few dozen units per URL)
UNITS_PER_TURN = 20_000


@dataclass(slots=True)
class PendingCheck:
    """A decision under way for the URL at the head of a host's queue."""

    rules: RobotsTxt
    url_key: bytes
    check: PathCheck


def decide_head(host: HostState, rules: RobotsTxt, agent: str, path: str,
                budget: int) -> tuple[DueUrl | None, bool, int]:
    """Advance the decision for the host's best queued URL by about ``budget`` units.

    Returns ``(due, allowed, spent)``: ``due`` is the URL, popped from the queue,
    once decided; None while the decision is still under way (it is kept on the
    host and resumed by the next call, unless the rules or the head URL changed).
    ``path`` is the robots path of the head URL.
    """
    due = host.peek()
    pending = host.robots_check
    if isinstance(pending, PendingCheck) and pending.rules is rules \
            and pending.url_key == due.url_key:
        check, fresh = pending.check, False
    else:
        at_once = rules.decide_at_once(agent, path)  # most decisions: no PathCheck at all
        if at_once is not None:
            host.robots_check = None
            host.pop()
            verdict, units = at_once
            return due, verdict is not False, units
        # the pending record is made only when the decision does not finish at once
        check, fresh = rules.check(agent, path), True
    spent = check.advance(budget)
    if not check.done:
        if fresh:
            host.robots_check = PendingCheck(rules, due.url_key, check)
        return None, False, spent
    host.robots_check = None
    host.pop()
    return due, check.allowed, spent
