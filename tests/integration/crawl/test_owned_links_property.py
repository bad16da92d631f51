"""Owner-local URL state, property-tested with the store as the truth (issue 29).

Workers (an :class:`Intake` with its :class:`KnownUrls`, a :class:`KnownUrlsLoader`)
share one real store (memory, SQLite) and go through random gains, losses, handovers,
partial loads, pages handed to a commit queue, commits of the whole queue (in order, as
the committer does) that fail before or after the write reached the store and are then
retried or given up with everything handed in since, and kill -9 (the worker's memory and
its queue are gone, its shards free). After every step:

* **never lost** — every link of every page whose commit succeeded is in the store (a
  link the intake dropped as known, or as written by an earlier batch, must be there);
* **no false claim** — every key a worker's set holds for a shard is in the store;
* **complete loads** — a shard whose load completed holds every key the store had
  when the shard was gained;
* **decided in memory** — a link to a shard whose load completed and whose key the set
  held, or an earlier batch not yet committed writes, is not written again;
* **never inserted twice** — the store holds each key once, and the inserts it reported
  add up to the rows it holds.

Broken on a scratch copy to watch it fail: the intake adding a key to the set as soon
as it decided "new" (before the write) — hypothesis found a page whose write failed
before reaching the store, and ``no false claim`` failed (``assert {b'\x7f\x93…'} <=
set()``: the set held a key the store did not). And with the loader finishing every
shard of a pass after its first read (``finished = list(self._pass)``), ``complete
loads`` failed (a shard called complete without keys the store held). And with
``KnownUrls.batch_ended`` keeping every pending key (a batch given up leaves its keys
"written" for good), ``never lost`` failed on the ``GIVEN_UP`` example (the random search
alone did not find it in 400 examples).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from courtier.core.clock import VirtualClock
from courtier.core.config import CrawlConfig
from courtier.core.errors import StoreError
from courtier.core.urls import SHARD_COUNT, canonicalize, shard_of_key
from courtier.crawl.intake import Intake, Scope
from courtier.crawl.known_loader import KnownUrlsLoader
from courtier.dedup.known_urls import KnownUrls
from courtier.store.base import NewUrl, Store
from courtier.store.memory import MemoryStore
from courtier.store.sqlite import SqliteStore

T0 = 1_700_000_000.0


def shard_of_host(host: str) -> int:
    return canonicalize(f"http://{host}/").shard


def _hosts(count: int) -> list[str]:
    """Hosts in distinct shards (a shard is a host's unit of ownership)."""
    out: list[str] = []
    shards: set[int] = set()
    n = 0
    while len(out) < count:
        host = f"h{n}.test"
        n += 1
        if shard_of_host(host) not in shards:
            shards.add(shard_of_host(host))
            out.append(host)
    return out


HOSTS = _hosts(3)
PATHS = 4


def url(h: int, p: int) -> str:
    return f"http://{HOSTS[h]}/p{p}"


class FlakyStore:
    """A store whose next write or read fails, before it reaches the store or after."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.fail: str | None = None
        self.reported = 0

    def _check(self, when: str) -> None:
        if self.fail == when:
            self.fail = None
            raise StoreError(f"injected failure {when} the call")

    async def add_urls(self, rows: Sequence[NewUrl]) -> int:
        self._check("before")
        added = await self.inner.add_urls(rows)
        self.reported += added
        self._check("after")
        return added

    async def url_keys(self, shards: Sequence[int], after: bytes, limit: int) -> bytes:
        self._check("before")
        blob = await self.inner.url_keys(shards, after, limit)
        self._check("after")
        return blob

    async def all_keys(self) -> list[bytes]:
        blob = await self.inner.url_keys(range(SHARD_COUNT), b"", 1 << 20)
        return [blob[i:i + 16] for i in range(0, len(blob), 16)]


@dataclass
class Owner:
    intake: Intake
    known: KnownUrls
    loader: KnownUrlsLoader
    held: set[int] = field(default_factory=set)
    #: shard → the store's keys of it when it was gained (a complete load holds them all)
    at_gain: dict[int, set[bytes]] = field(default_factory=dict)
    #: pages handed to the committer and not committed yet: (rows, every link's key)
    queue: list[tuple[list[NewUrl], set[bytes]]] = field(default_factory=list)


def fresh(store: Any) -> Owner:
    known = KnownUrls()
    intake = Intake(Scope(CrawlConfig(scope="any"), []), known=known)
    # tiny reads: a shard's load spans several steps and passes
    return Owner(intake, known, KnownUrlsLoader(store, known, keys_per_read=2, keys_per_turn=3))


FAIL = st.sampled_from([None, None, "before", "after"])
OPS = st.lists(st.one_of(
    st.tuples(st.just("gain"), st.integers(0, 1), st.integers(0, len(HOSTS) - 1)),
    st.tuples(st.just("lose"), st.integers(0, 1), st.integers(0, len(HOSTS) - 1)),
    st.tuples(st.just("step"), st.integers(0, 1), FAIL),
    st.tuples(st.just("page"), st.integers(0, 1),
              st.lists(st.tuples(st.integers(0, len(HOSTS) - 1), st.integers(0, PATHS - 1)),
                       max_size=8)),
    st.tuples(st.just("commit"), st.integers(0, 1), FAIL, st.booleans()),
    st.tuples(st.just("kill"), st.integers(0, 1)),
), max_size=45)


async def run(inner: Store, ops: list[tuple[Any, ...]]) -> None:
    store = FlakyStore(inner)
    owners = [fresh(store) for _ in range(3)]
    holder: dict[int, int] = {}
    required: set[bytes] = set()
    for op in ops:
        kind, w = op[0], op[1]
        me = owners[w]
        if kind == "gain":
            shard = shard_of_host(HOSTS[op[2]])
            prev = holder.get(shard)
            if prev != w:
                if prev is not None:  # a handover or a loss: the old owner drops it
                    owners[prev].loader.dropped([shard])
                    owners[prev].held.discard(shard)
                me.loader.gained([shard])
                me.held.add(shard)
                me.at_gain[shard] = {k for k in await store.all_keys()
                                     if shard_of_key(k) == shard}
                holder[shard] = w
        elif kind == "lose":
            shard = shard_of_host(HOSTS[op[2]])
            if holder.get(shard) == w:
                me.loader.dropped([shard])
                me.held.discard(shard)
                del holder[shard]
        elif kind == "step":
            store.fail = op[2]
            with contextlib.suppress(StoreError):
                await me.loader.step()
            store.fail = None
        elif kind == "page":  # fetched and parsed: its result is handed to the committer
            raws = [url(h, p) for h, p in op[2]]
            before = {k: me.known.knows(k, s) for k, s in
                      ((canonicalize(r).url_key, canonicalize(r).shard) for r in raws)}
            pending = {k for k in before if me.known.is_pending(k)}
            rows = me.intake.links(raws, 1, T0)
            for row in rows:  # decided in memory: a key the set held is never written,
                assert before[row.url_key] is not True, row.url
                if before[row.url_key] is False:  # nor one an earlier batch writes
                    assert row.url_key not in pending, row.url
            me.intake.handed_in(r.url_key for r in rows)
            me.queue.append((rows, set(before)))
        elif kind == "commit":  # one batch: every page handed in, in order
            batch, me.queue = me.queue, []
            if not batch:
                continue
            generation = me.intake.batch_started()
            store.fail = op[2]
            try:
                await store.add_urls([r for rows, _ in batch for r in rows])
            except StoreError:
                store.fail = None
                if not op[3]:  # retried later, before anything handed in since
                    me.queue = batch + me.queue
                # else given up, with all handed in since: fetched again, not required
            else:
                me.intake.remember(r.url_key for rows, _ in batch for r in rows)
                for _, links in batch:
                    required |= links
            finally:
                me.intake.batch_ended(generation)
        elif kind == "kill":  # kill -9: the memory and the queue are gone, the leases end
            for shard in me.held:
                holder.pop(shard, None)
            owners[w] = fresh(store)
        keys = await store.all_keys()
        in_store = set(keys)
        assert len(keys) == len(in_store) == store.reported  # never inserted twice
        assert required <= in_store  # never lost
        for owner in owners:
            for shard in owner.held:
                claimed = set(owner.known.keys_of(shard))
                assert claimed <= in_store  # no false claim
                if owner.known.is_complete(shard):  # a complete load read every key
                    assert owner.at_gain[shard] <= claimed

#: a batch given up (its write failed before reaching the store) while a later page left
#: its link out as written by it; a batch retried after a failure
GIVEN_UP = [("gain", 0, 0), ("step", 0, None), ("page", 0, [(0, 1)]),
            ("commit", 0, "before", True), ("page", 0, [(0, 1), (0, 2)]),
            ("commit", 0, None, False)]
RETRIED = [("gain", 1, 1), ("step", 1, None), ("page", 1, [(1, 1), (2, 0)]),
           ("page", 1, [(1, 1)]), ("commit", 1, "before", False), ("page", 1, [(1, 1)]),
           ("commit", 1, None, False), ("kill", 1), ("gain", 0, 1), ("step", 0, None),
           ("page", 0, [(1, 1), (1, 3)]), ("commit", 0, "after", False)]


@settings(max_examples=400, deadline=None)
@given(OPS)
@example(GIVEN_UP)
@example(RETRIED)
def test_owned_links_never_lost_nor_inserted_twice_memory(ops: list[tuple[Any, ...]]) -> None:
    asyncio.run(run(MemoryStore(clock=VirtualClock(T0)), ops))


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_owned_links_never_lost_nor_inserted_twice_sqlite(ops: list[tuple[Any, ...]]) -> None:
    async def body() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            store = SqliteStore(Path(tmp) / "crawl.sqlite", clock=VirtualClock(T0))
            await store.open()
            try:
                await run(store, ops)
            finally:
                await store.close()

    asyncio.run(body())
