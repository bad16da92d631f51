"""Stand-ins for the committer's collaborators: a clock the test moves, a store that
records what each commit carried, an intake that only counts, and a made-up result."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from courtier.core.outcome import Outcome
from courtier.core.records import CommitResult, FetchCommit, HostStatsDelta


@dataclass
class ManualClock:
    at: float = 100.0

    def now(self) -> float:
        return self.at


class DurableArchive:
    """An archive whose records are durable at once."""

    async def flush_off_loop(self) -> None:
        return None


@dataclass
class RecordingStore:
    """Each commit as (archive durable then, rows, host counters carried)."""

    archive: object = None
    committed: list[tuple[bool, int, list[HostStatsDelta]]] = field(default_factory=list)

    async def commit(self, batch: Sequence[FetchCommit],
                     stats: Sequence[HostStatsDelta]) -> CommitResult:
        durable = bool(getattr(self.archive, "durable", True))
        self.committed.append((durable, len(batch), list(stats)))
        return CommitResult(applied=len(batch), stale=0, new_urls=0)


class CountingIntake:
    known_skips = 0

    def handed_in(self, keys: Iterable[bytes]) -> None:
        list(keys)

    def batch_started(self) -> int:
        return 0

    def batch_ended(self, generation: int) -> None:
        return None

    def remember(self, keys: Iterable[bytes]) -> None:
        list(keys)


def result(n: int, host: str = "http://a.test") -> FetchCommit:
    """A fetched page of ``host``, fetched at local time 99."""
    return FetchCommit(bytes([n]) * 16, f"{host}/{n}", host, 1, 1, 1,
                       Outcome.OK, 99.0, 200.0, status=200)
