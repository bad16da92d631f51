"""Rows and the store clock's start shared by the PostgreSQL store tests of this folder."""

from __future__ import annotations

from courtier.core.outcome import Outcome
from courtier.core.urls import canonicalize
from courtier.store.base import FetchCommit, NewUrl

T0 = 1_700_000_000.0


def url_row(url: str, *, priority: int = 0, due: float = T0, depth: int = 0) -> NewUrl:
    c = canonicalize(url)
    return NewUrl(c.url_key, c.url, c.host_key, c.shard, depth, priority, due, T0)


def finished(new: NewUrl, epoch: int = 0) -> FetchCommit:
    return FetchCommit(url_key=new.url_key, url=new.url, host_key=new.host_key,
                       shard=new.shard, version=0, epoch=epoch, outcome=Outcome.OK,
                       fetched_at=T0 + 1, next_fetch_at=T0 + 3600, status=200)
