"""The two-level URL frontier: host selection, per-host URL queues, leases."""

from courtier.frontier.host import HostPolicy, HostState
from courtier.frontier.lease import FetchFeedback, Lease, LeaseKind
from courtier.frontier.scheduler import Frontier, path_of

__all__ = ["FetchFeedback", "Frontier", "HostPolicy", "HostState", "Lease", "LeaseKind", "path_of"]
