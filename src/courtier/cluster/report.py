"""What ``courtier cluster`` and ``GET /v1/cluster`` show: workers, the shards each
holds, epochs, lease ages and handovers, from one :class:`~courtier.store.cluster.ClusterView`.

Pure: the view carries the store's ``now``, so every age is on the store clock
(no worker's clock is involved). A worker is *live* while its last heartbeat is
younger than ``worker_ttl`` (the default equals the default ``--lease-ttl``).
"""

from __future__ import annotations

from typing import Any

from courtier.store.cluster import ClusterView

#: the liveness window of ``courtier cluster`` when not given (the default --lease-ttl)
DEFAULT_WORKER_TTL = 30.0


def cluster_report(view: ClusterView, worker_ttl: float = DEFAULT_WORKER_TTL) -> dict[str, Any]:
    """The JSON answer: ``workers`` (one entry per row, live or not, and one per owner
    holding leases without a row), ``shards`` totals, ``handovers`` counters."""
    now = view.now
    held: dict[str, list[int]] = {}
    ages: dict[str, list[float]] = {}
    epochs: dict[str, int] = {}
    expired = 0
    for lease in view.leases:
        if lease.owner is None:
            continue
        if lease.expires_at <= now:
            expired += 1
            continue
        held.setdefault(lease.owner, []).append(lease.shard)
        ages.setdefault(lease.owner, []).append(max(0.0, now - lease.acquired_at))
        epochs[lease.owner] = max(epochs.get(lease.owner, 0), lease.epoch)
    workers = []
    known = set()
    for w in view.workers:
        known.add(w.worker_id)
        workers.append(_worker(w.worker_id, now, held, ages, epochs, {
            "weight": w.weight,
            "live": w.heartbeat_at + worker_ttl > now,
            "heartbeat_age": round(max(0.0, now - w.heartbeat_at), 3),
            "started_at": w.started_at,
            "info": w.info,
        }))
    for owner in sorted(set(held) - known):  # holds leases but left (or never registered)
        workers.append(_worker(owner, now, held, ages, epochs, {
            "weight": None, "live": False, "heartbeat_age": None, "started_at": None,
            "info": {}}))
    held_total = sum(len(s) for s in held.values())
    return {
        "now": now,
        "worker_ttl": worker_ttl,
        "workers": workers,
        "live_workers": sum(1 for w in workers if w["live"]),
        "shards": {"held": held_total, "expired": expired,
                   "leased_ever": len(view.leases)},
        "max_epoch": max((lease.epoch for lease in view.leases), default=0),
        "handovers": dict(view.handovers),
    }


def _worker(worker_id: str, now: float, held: dict[str, list[int]],
            ages: dict[str, list[float]], epochs: dict[str, int],
            fields: dict[str, Any]) -> dict[str, Any]:
    shards = sorted(held.get(worker_id, []))
    lease_ages = sorted(ages.get(worker_id, []))
    return {
        "worker_id": worker_id,
        **fields,
        "shards": len(shards),
        "shard_list": shards,
        "max_epoch": epochs.get(worker_id, 0),
        "lease_age_min": round(lease_ages[0], 3) if lease_ages else None,
        "lease_age_max": round(lease_ages[-1], 3) if lease_ages else None,
    }


def render_text(report: dict[str, Any]) -> str:
    """A terminal table of :func:`cluster_report`'s answer."""
    lines = [f"{report['live_workers']} live worker(s); {report['shards']['held']} shards held,"
             f" {report['shards']['expired']} expired; handovers so far: "
             f"{report['handovers'].get('graceful', 0)} graceful, "
             f"{report['handovers'].get('takeover', 0)} takeover"]
    header = f"{'worker':<24} {'live':<5} {'weight':>6} {'beat age':>9} {'shards':>6}" \
             f" {'epoch':>6} {'lease age':>17}  api"
    lines.append(header)
    for w in report["workers"]:
        beat = "-" if w["heartbeat_age"] is None else f"{w['heartbeat_age']:.1f}s"
        weight = "-" if w["weight"] is None else f"{w['weight']:g}"
        age = "-" if w["lease_age_min"] is None else \
            f"{w['lease_age_min']:.0f}-{w['lease_age_max']:.0f}s"
        lines.append(f"{w['worker_id']:<24} {'yes' if w['live'] else 'no':<5} {weight:>6}"
                     f" {beat:>9} {w['shards']:>6} {w['max_epoch']:>6} {age:>17}"
                     f"  {w['info'].get('api', '-')}")
    return "\n".join(lines) + "\n"
