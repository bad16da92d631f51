"""Per-IP caps that hold across workers: slots leased from the store.

Hosts that share an address may live on different workers (their shards come
from their host names, not their addresses), so each worker's in-memory IP cap
(``--max-in-flight-per-ip``, ``--ip-delay``) is not enough. A cluster worker asks
the store for a slot of the address before each request
(:meth:`~courtier.store.cluster.ClusterStore.acquire_ip_slot`: atomic per
address, at most ``max_in_flight_per_ip`` held, starts at least ``ip_delay``
apart) and gives it back when the request ends. A slot lasts at most the fetch's
total timeout plus a margin, so one held by a worker that died frees itself.

The cost is two small store round trips per request, paid only with many
workers; ``--max-in-flight-per-ip 0`` turns the cap (and the cost) off.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging

from courtier.cluster.coordinator import ShardCoordinator
from courtier.core.clock import Clock
from courtier.core.errors import StoreError
from courtier.core.logs import log_event
from courtier.store.base import Store
from courtier.store.cluster import IpGrant

log = logging.getLogger("courtier.worker")

__all__ = ["IpSlots"]

STORE_TROUBLE_WAIT = 1.0   # seconds a request waits when the store could not be asked
FULL_POLL = 0.1            # seconds before asking again for a slot of a full address


class IpSlots:
    def __init__(self, store: Store, coordinator: ShardCoordinator, clock: Clock,
                 max_concurrent: int, min_gap: float, slot_seconds: float) -> None:
        self.store = store
        self.coordinator = coordinator
        self.clock = clock
        self.max_concurrent = max_concurrent
        self.min_gap = min_gap
        self.slot_seconds = slot_seconds
        self.refused = 0
        self._releases: set[asyncio.Task[None]] = set()
        self._asks: set[asyncio.Future[IpGrant]] = set()   # cancelled callers' store calls

    async def acquire(self, ip: str) -> int | float:
        """A slot's token (int), or the local time (float) before which to ask again.

        Cancelled while the store is asked (a fence, a drain), the call still runs to
        its end and a slot it granted is given back at once: nobody would use it, and
        the address would be one slot short until it expired."""
        ask = asyncio.ensure_future(self.store.acquire_ip_slot(
            ip, self.coordinator.worker_id, self.max_concurrent, self.min_gap,
            self.slot_seconds, self.clock.now()))
        try:
            grant = await asyncio.shield(ask)
        except asyncio.CancelledError:
            self._asks.add(ask)
            ask.add_done_callback(functools.partial(self._unwanted, ip))
            raise
        except StoreError as exc:
            log_event(log, logging.WARNING, "ip_slot_unavailable",
                      "could not ask for a slot of %s: %s", ip, exc, ip=ip, reason=str(exc))
            return self.clock.now() + STORE_TROUBLE_WAIT
        if grant.granted:
            return int(grant.token)
        self.refused += 1
        # when the address is full, retry_at is only the earliest expiry of a slot (a
        # request's time-out): slots are usually given back long before, so ask again soon
        now = self.clock.now()
        at = self.coordinator.to_local_time(grant.retry_at) + self.coordinator.offset_error
        return min(at, now + FULL_POLL) if at > now else now + FULL_POLL

    def _unwanted(self, ip: str, ask: asyncio.Future[IpGrant]) -> None:
        self._asks.discard(ask)
        if not ask.cancelled() and ask.exception() is None and ask.result().granted:
            self.release(ip, int(ask.result().token))

    async def settle(self) -> None:
        """Wait for the store calls of cancelled callers and the background releases."""
        while self._asks or self._releases:
            await asyncio.gather(*self._asks, *self._releases, return_exceptions=True)

    def release(self, ip: str, token: int) -> None:
        """Give the slot back in the background (it expires by itself if this fails)."""
        task = asyncio.ensure_future(self._release(ip, token))
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _release(self, ip: str, token: int) -> None:
        with contextlib.suppress(StoreError):
            await self.store.release_ip_slot(ip, token)
