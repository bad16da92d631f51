"""The worker's side of the refresh planner: feed it what the store knows.

:func:`prepare` runs after every refill: it reads the stored values of the URLs
just loaded and the freshness overrides of their hosts (two batched queries;
the refill itself is unchanged) and hands them to the planner, which uses them
when those URLs are committed.
"""

from __future__ import annotations

from collections.abc import Sequence

from courtier.frontier.refresh import RefreshPlanner
from courtier.store.base import DueUrl, Store


async def prepare(store: Store, planner: RefreshPlanner, due: Sequence[DueUrl]) -> None:
    """Load values and host overrides for ``due`` into ``planner``."""
    if not due:
        return
    values = {d.url_key: d.value for d in due if d.value is not None}
    hosts = {d.host_key for d in due}
    overrides = await store.host_tiers(hosts)
    for host in hosts - set(overrides):
        planner.hosts.pop(host, None)  # an override cleared since
    planner.remember(values, overrides)
