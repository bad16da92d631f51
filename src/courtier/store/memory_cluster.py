"""The cluster half of the in-memory Store (see store/cluster.py for the contract).

Times are the caller's ``now`` (the simulator's virtual clock); :meth:`store_now`
is the store's own clock. Every method completes without awaiting, so each is
atomic under one event loop — which is what the contract asks of a transaction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from courtier.clock import Clock
from courtier.store.base import DayCount
from courtier.store.cluster import (
    ClusterView,
    DayGrant,
    DayReservation,
    HostClock,
    IpGrant,
    LeaseRecord,
    ScopeRule,
    TrapStats,
    WorkerRecord,
)
from courtier.store.cluster_rules import (
    acquire_step,
    check_scope_kinds,
    day_grant,
    day_window,
    ip_retry_at,
)

#: a shard never leased: no owner, epoch 0, expired
FREE = (None, 0, 0.0)


class MemoryClusterState:
    """Mixed into MemoryStore: membership, leases, budget, clocks, IP slots, scope."""

    clock: Clock
    shards: dict[int, tuple[str | None, int, float]]
    day_counts: dict[str, DayCount]
    urls: dict[bytes, dict[str, Any]]

    def _init_cluster(self) -> None:
        self._workers: dict[str, WorkerRecord] = {}
        self._acquired_at: dict[int, float] = {}
        self._last_owner: dict[int, str] = {}
        self._handovers = {"graceful": 0, "takeover": 0}
        self._host_clocks: dict[str, HostClock] = {}
        self._trap_stats: dict[str, TrapStats] = {}
        self._ip_next: dict[str, float] = {}
        #: ip -> token -> (expires_at, owner)
        self._ip_slots: dict[str, dict[int, tuple[float, str]]] = {}
        self._ip_token = 0
        self._scope: list[ScopeRule] = []

    async def store_now(self) -> float:
        return self.clock.now()

    # ---- membership ----------------------------------------------------------------------

    async def heartbeat(self, worker_id: str, weight: float, info: Mapping[str, Any],
                        now: float) -> float:
        old = self._workers.get(worker_id)
        self._workers[worker_id] = WorkerRecord(
            worker_id, weight, now, old.started_at if old else now, dict(info))
        return now

    async def leave(self, worker_id: str) -> None:
        self._workers.pop(worker_id, None)

    async def prune_workers(self, max_age: float, now: float) -> list[str]:
        holding = {owner for owner, _, expires in self.shards.values() if expires > now}
        gone = sorted(w for w, record in self._workers.items()
                      if record.heartbeat_at < now - max_age and w not in holding)
        for worker_id in gone:
            del self._workers[worker_id]
        return gone

    async def cluster_view(self, shards: Collection[int] | None = None) -> ClusterView:
        wanted = sorted(self.shards) if shards is None else sorted(
            s for s in set(shards) if s in self.shards)
        leases = [LeaseRecord(s, *self.shards[s], self._acquired_at.get(s, 0.0))
                  for s in wanted]
        workers = [self._workers[k] for k in sorted(self._workers)]
        return ClusterView(self.clock.now(), workers, leases, dict(self._handovers))

    # ---- leases --------------------------------------------------------------------------

    async def acquire_shards(self, owner: str, shards: Sequence[int], now: float,
                             lease_seconds: float) -> dict[int, int]:
        held: dict[int, int] = {}
        for shard in shards:
            current, epoch, expires = self.shards.get(shard, FREE)
            step = acquire_step(owner, current, epoch, expires, self._last_owner.get(shard),
                                now)
            if step is None:
                continue
            if step.handover is not None:
                self._handovers[step.handover] += 1
            if step.new_term:
                self._acquired_at[shard] = now
            self.shards[shard] = (owner, step.epoch, now + lease_seconds)
            self._last_owner[shard] = owner
            held[shard] = step.epoch
        return held

    async def renew_shards(self, owner: str, epochs: dict[int, int], now: float,
                           lease_seconds: float) -> set[int]:
        kept = set()
        for shard, epoch in epochs.items():
            current, current_epoch, _ = self.shards.get(shard, FREE)
            if current == owner and current_epoch == epoch:
                self.shards[shard] = (owner, epoch, now + lease_seconds)
                kept.add(shard)
        return kept

    async def release_shards(self, owner: str, shards: Sequence[int],
                             epochs: Mapping[int, int] | None = None) -> None:
        mine = []
        for shard in shards:
            current, epoch, _ = self.shards.get(shard, FREE)
            if current != owner or (epochs is not None and epochs.get(shard) != epoch):
                continue
            self.shards[shard] = (None, epoch + 1, 0.0)
            self._acquired_at.pop(shard, None)
            mine.append(shard)
        await self._requeue_scheduled(mine)

    def _epoch_ok(self, shard: int, epochs: Mapping[int, int] | None) -> bool:
        """True when a write fenced by ``epochs`` may touch ``shard``."""
        return epochs is None or (shard in epochs
                                  and self.shards.get(shard, FREE)[1] == epochs[shard])

    async def _requeue_scheduled(self, shards: Sequence[int]) -> int:
        raise NotImplementedError  # MemoryStore provides it

    # ---- shared daily budget -------------------------------------------------------------

    async def reserve_day_counts(self, reservations: Sequence[DayReservation]
                                 ) -> dict[str, DayGrant]:
        grants: dict[str, DayGrant] = {}
        for ask in reservations:
            stored = self.day_counts.get(ask.key)
            start, used = day_window(ask, None if stored is None else (stored.day_start,
                                                                        stored.used))
            granted = day_grant(ask, used)
            used += granted
            self.day_counts[ask.key] = DayCount(ask.key, start, used)
            grants[ask.key] = DayGrant(ask.key, start, granted, used)
        return grants

    # ---- host politeness clocks ----------------------------------------------------------

    async def save_host_clocks(self, clocks: Sequence[HostClock]) -> None:
        now = self.clock.now()
        for clock in clocks:
            self._host_clocks[clock.host_key] = dataclasses.replace(clock, saved_at=now)

    async def load_host_clocks(self, host_keys: Collection[str]) -> dict[str, HostClock]:
        return {k: self._host_clocks[k] for k in host_keys if k in self._host_clocks}

    # ---- trap statistics and near-duplicate fingerprints of a shard -----------------------

    async def save_trap_stats(self, stats: Sequence[TrapStats]) -> None:
        now = self.clock.now()
        for item in stats:
            self._trap_stats[item.host_key] = dataclasses.replace(
                item, data=bytes(item.data), saved_at=now)

    async def load_trap_stats(self, host_keys: Collection[str]) -> dict[str, TrapStats]:
        return {k: self._trap_stats[k] for k in host_keys if k in self._trap_stats}

    async def load_simhashes(self, shards: Collection[int], limit_per_shard: int
                             ) -> dict[int, list[tuple[bytes, int]]]:
        wanted = set(shards)
        found: dict[int, list[tuple[float, bytes, int]]] = {}
        for key, row in self.urls.items():
            if row["shard"] in wanted and row.get("simhash") is not None:
                found.setdefault(row["shard"], []).append(
                    (-(row["last_fetch_at"] or 0.0), key, row["simhash"]))
        out = {}
        for shard, rows in found.items():
            rows.sort()
            if limit_per_shard > 0:
                out[shard] = [(key, fp) for _, key, fp in rows[:limit_per_shard]]
        return out

    # ---- per-IP slots --------------------------------------------------------------------

    async def acquire_ip_slot(self, ip: str, owner: str, max_concurrent: int,
                              min_gap: float, ttl: float, now: float) -> IpGrant:
        slots = {t: held for t, held in self._ip_slots.get(ip, {}).items() if held[0] > now}
        self._ip_slots[ip] = slots
        retry = ip_retry_at(self._ip_next.get(ip, float("-inf")),
                            [expires for expires, _ in slots.values()], max_concurrent, now)
        if retry is not None:
            return IpGrant(False, now, retry_at=retry)
        self._ip_token += 1
        slots[self._ip_token] = (now + ttl, owner)
        self._ip_next[ip] = now + min_gap
        return IpGrant(True, now, self._ip_token, now + ttl)

    async def release_ip_slot(self, ip: str, token: int) -> None:
        self._ip_slots.get(ip, {}).pop(token, None)

    async def release_ip_slots_of(self, owner: str) -> int:
        freed = 0
        for slots in self._ip_slots.values():
            mine = [t for t, (_, holder) in slots.items() if holder == owner]
            for token in mine:
                del slots[token]
            freed += len(mine)
        return freed

    # ---- scope ---------------------------------------------------------------------------

    async def add_scope_rules(self, rules: Sequence[ScopeRule]) -> int:
        check_scope_kinds(rules)
        known = {(r.kind, r.value) for r in self._scope}
        added = 0
        for rule in rules:
            if (rule.kind, rule.value) in known:
                continue
            known.add((rule.kind, rule.value))
            self._scope.append(ScopeRule(rule.kind, rule.value, len(self._scope) + 1))
            added += 1
        return added

    async def scope_rules(self, after: int = 0) -> list[ScopeRule]:
        return [r for r in self._scope if r.id > after]
