"""Persistence: the Store protocol and its implementations (sqlite/, later postgres/)."""

from courtier.store.base import (
    CommitResult,
    DueUrl,
    Event,
    FetchCommit,
    HostRecord,
    HostStatsDelta,
    NewUrl,
    Store,
    UrlState,
)

__all__ = [
    "CommitResult",
    "DueUrl",
    "Event",
    "FetchCommit",
    "HostRecord",
    "HostStatsDelta",
    "NewUrl",
    "Store",
    "UrlState",
]
