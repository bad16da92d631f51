"""Weighted rendezvous hashing of shards onto workers.

For shard ``s`` and worker ``w`` with weight ``c`` the score is
``-c / ln(u(w, s))`` where ``u`` is a uniform number in (0, 1) derived from a
stable 64-bit hash of ``(w, s)``; the worker with the highest score is the
shard's target owner (Schindelhauer & Schomaker's weighted form of Thaler &
Ravishankar's highest-random-weight hashing). Properties the cluster relies on:

* deterministic across processes and machines (xxh3, never Python's ``hash``);
* a worker's expected share is proportional to its weight;
* when a worker joins, only the shards it now wins move, all to it; when one
  leaves, only its shards move, spread over the others in proportion to
  their weights — about 1/N of the shards either way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import xxhash

__all__ = ["owner_of", "score", "target_owners"]

_TWO_64 = float(1 << 64)


def score(worker_id: str, shard: int, weight: float = 1.0) -> float:
    """The rendezvous score of ``worker_id`` for ``shard`` (higher wins)."""
    if weight <= 0:
        return -math.inf
    digest = xxhash.xxh3_64_intdigest(f"{worker_id}\x00{shard}".encode())
    uniform = (digest + 0.5) / _TWO_64  # strictly inside (0, 1)
    return -weight / math.log(uniform)


def owner_of(shard: int, weights: Mapping[str, float]) -> str | None:
    """The target owner of ``shard`` among ``weights`` (worker id → weight), or None.

    Ties (practically impossible) go to the smaller worker id, so every
    process computes the same answer.
    """
    best: str | None = None
    best_score = -math.inf
    for worker_id in sorted(weights):
        s = score(worker_id, shard, weights[worker_id])
        if s > best_score:
            best, best_score = worker_id, s
    return best


def target_owners(shards: Iterable[int], weights: Mapping[str, float]) -> dict[int, str]:
    """``{shard: target owner}`` for every shard; empty when no worker has a weight > 0."""
    live = {w: c for w, c in weights.items() if c > 0}
    if not live:
        return {}
    result: dict[int, str] = {}
    for shard in shards:
        owner = owner_of(shard, live)
        if owner is not None:
            result[shard] = owner
    return result
