"""Where a reader's last refill walk stopped, so that its next one resumes there.

Owns: one reader's last walk place (a store instance keeps one: a worker is one reader
of its shards).

The refill (``Store.read_due``) walks the ready hosts in the contract's order and skips
the hosts its caller holds, and those are the hosts earlier refills returned: the first
the walk meets. A store that can tell which hosts changed since a walk (PostgreSQL:
host-queue rows written by transactions not finished at that walk's snapshot) resumes
the next walk after the last host the previous one returned, and reads before that
point only the hosts that may have entered it (docs/scale-out.md, "Resuming the walk"):

* hosts changed since (the store's own query);
* hosts whose readiness or overdue state moved with the clock (``next_due_at`` in
  ``(then, now]`` or in ``[then - OVERDUE_AFTER, now - OVERDUE_AFTER)``);
* hosts the previous walk returned or skipped that are not skipped now (``released``).

Every other ready host before the place was returned or skipped by the previous walk
and is skipped now. The place is used only while the new call's shards are among the
previous ones, its ``epochs`` are the same, and the clock has not gone back; otherwise
the walk starts from the beginning (and leaves a new place).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from courtier.core.records import OVERDUE_AFTER
from courtier.core.urls import shard_of

#: a host's place in the walk: (overdue, best priority, next_due_at, host_key, shard),
#: ordered as the walk goes (overdue first, then best priority descending)
WalkKey = tuple[bool, int, float, str, int]


@dataclass(frozen=True)
class WalkPlace:
    """Where a walk stopped: ``after`` is the walk key of the last host it returned
    (None: it returned fewer rows than asked, so it walked every ready host)."""

    shards: frozenset[int]
    epochs: tuple[tuple[int, int], ...] | None
    now: float
    since: int  # the store's change mark at that walk (PostgreSQL: its snapshot's xmin)
    after: WalkKey | None
    #: the hosts it skipped or returned, each with its shard where the walk read one (a
    #: skipped host's is not known: ``shard_of`` of its key then; never changed once kept)
    covered: dict[str, int | None]

    @property
    def overdue_before(self) -> float:
        return self.now - OVERDUE_AFTER


@dataclass(frozen=True)
class Resume:
    """What a walk resuming at ``place`` needs besides it: the hosts the previous walk
    skipped or returned that are not skipped now, as (shard, host_key)."""

    place: WalkPlace
    released: list[tuple[int, str]]


def _epochs(epochs: Mapping[int, int] | None) -> tuple[tuple[int, int], ...] | None:
    return None if epochs is None else tuple(sorted(epochs.items()))


class WalkPlaces:
    """The last walk place of one reader."""

    def __init__(self) -> None:
        self._place: WalkPlace | None = None

    def resume(self, shards: Collection[int], now: float, epochs: Mapping[int, int] | None,
               skip: Collection[str]) -> Resume | None:
        """The place to resume from for this call, or None (walk from the start)."""
        place = self._place
        if (place is None or now < place.now or _epochs(epochs) != place.epochs
                or not place.shards.issuperset(shards)):
            return None
        skipped = skip if isinstance(skip, (set, frozenset)) else set(skip)
        covered = place.covered
        return Resume(place, [(shard if (shard := covered[h]) is not None else shard_of(h), h)
                              for h in covered.keys() - skipped])

    def record(self, shards: Collection[int], now: float, epochs: Mapping[int, int] | None,
               since: int, after: WalkKey | None, skipped: Collection[str],
               walked: Iterable[tuple[int, str]]) -> None:
        """A walk at ``now`` (its change mark ``since``), skipping ``skipped``, returned or
        stepped over the hosts ``walked`` (shard, host) and every ready host up to ``after`` (None:
        every ready host) was one of the two."""
        # one copy: the caller's set may change after the call
        covered: dict[str, int | None] = dict.fromkeys(skipped)
        covered.update((h, shard) for shard, h in walked)
        self._place = WalkPlace(frozenset(shards), _epochs(epochs), now, since, after, covered)
