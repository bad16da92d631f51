"""The memory store's part of the refresh plan: URL values, host tiers, counts by tier."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from courtier.store.base import UNPLANNED_TIER, HostTierRecord, UrlState


class MemoryPlans:
    """Works on the memory store's URL rows (shared dict) plus its own host overrides."""

    def __init__(self, urls: dict[bytes, dict[str, Any]]) -> None:
        self.urls = urls
        self.hosts: dict[str, HostTierRecord] = {}

    def set_values(self, items: Sequence[tuple[bytes, float | None]]) -> int:
        changed = 0
        for key, value in items:
            row = self.urls.get(key)
            if row is not None:
                row["value"] = value
                changed += 1
        return changed

    def url_values(self, url_keys: Collection[bytes]) -> dict[bytes, float]:
        out: dict[bytes, float] = {}
        for key in url_keys:
            row = self.urls.get(key)
            if row is not None and row.get("value") is not None:
                out[key] = float(row["value"])
        return out

    def set_host_tier(self, record: HostTierRecord) -> None:
        if record.is_empty():
            self.hosts.pop(record.host_key, None)
        else:
            self.hosts[record.host_key] = record

    def host_tiers(self, host_keys: Collection[str]) -> dict[str, HostTierRecord]:
        return {k: self.hosts[k] for k in host_keys if k in self.hosts}

    def tier_counts(self, shards: Sequence[int], until: float) -> dict[str, int]:
        wanted = set(shards)
        out: dict[str, int] = {}
        for row in self.urls.values():
            if (row["shard"] in wanted and row["state"] == UrlState.QUEUED
                    and row["next_fetch_at"] is not None and row["next_fetch_at"] < until):
                tier = row.get("tier") or UNPLANNED_TIER
                out[tier] = out.get(tier, 0) + 1
        return out
