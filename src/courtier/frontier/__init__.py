"""The two-level URL frontier: host selection, per-host URL queues, leases.

The names below load on first use (PEP 562), so that importing one light module of
the package (``frontier.budget`` for ``DAY``) does not load the scheduler, the host
state and the robots code: the store and the query commands need those constants only.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from courtier.frontier.host import HostPolicy, HostState
    from courtier.frontier.lease import FetchFeedback, Lease, LeaseKind
    from courtier.frontier.scheduler import Frontier, path_of

_HOMES = {
    "HostPolicy": "courtier.frontier.host", "HostState": "courtier.frontier.host",
    "FetchFeedback": "courtier.frontier.lease", "Lease": "courtier.frontier.lease",
    "LeaseKind": "courtier.frontier.lease", "Frontier": "courtier.frontier.scheduler",
    "path_of": "courtier.frontier.scheduler",
}

__all__ = ["FetchFeedback", "Frontier", "HostPolicy", "HostState", "Lease", "LeaseKind", "path_of"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'courtier.frontier' has no attribute {name!r}")
    return getattr(import_module(home), name)
