"""Trap template statistics kept in the store: across a shard's move, a restart, and
beyond the tracker's working set.

A :class:`~courtier.frontier.traps.TemplateTracker` lives in one worker's memory.
With many workers a host's shard moves (a handover, a crash); without its
statistics the new owner would give a known trap a fresh allowance
(``template_min_urls + sample_budget`` URLs) after every move, and so would the
next run of an embedded crawl, or the tracker itself after pushing the host out of
its working set of ``max_hosts``. So each host's statistics are saved in the store
(``Store.save_trap_stats``: on handover or on leaving, every few seconds, and when
the host leaves the working set changed) and merged back in when the refill
registers the host, and before a page of a host that left the working set is
processed (``cluster/shard_state.py``).

:class:`ShardedTemplateTracker` is a tracker that also remembers which hosts
changed since they were last saved (``take_dirty``), and encodes / merges one
host's state as a compact versioned blob (:func:`encode_host` /
:func:`decode_host`): zlib over a fixed layout per template — the counters,
the depth range, the hour counts, the throttle (``since``/``reason``) and the
HyperLogLog registers (256 bytes each). A host of 64 templates is a few KB.

Merging is a union, so it is idempotent and order-free: registers take the larger
rank (:meth:`~courtier.frontier.templates.DistinctCounter.merge`), counts the larger
value, the depth range widens, the earlier throttle wins. Restoring the same blob
twice, or a blob older than what is in memory, changes nothing. Pure: no I/O.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable

from courtier.core.clock import Clock
from courtier.frontier.templates import DistinctCounter, TemplateStats
from courtier.frontier.traps import TemplateTracker, TrapRules, _Host

__all__ = ["ShardedTemplateTracker", "decode_host", "encode_host", "export", "merge_stats"]

_VERSION = 1
_HEAD = struct.Struct("<BqIH")            # version, day, day_admitted, templates
_TEMPLATE = struct.Struct("<HBIIiiqIIdB")  # name length, flags, counts…, reason length
_REGISTERS = 256
_MAX_BLOB = 1 << 22                        # decompressed bytes accepted (4 MiB)
_ALIASES, _COMBOS, _ATOMS, _DEPTH, _SINCE = 1, 2, 4, 8, 16
_U32 = (1 << 32) - 1

#: one host's decoded state: (day, day_admitted, [(template, stats), …] oldest first)
HostState = tuple[int, int, list[tuple[str, TemplateStats]]]


def _pack_template(template: str, s: TemplateStats) -> bytes:
    name = template.encode("utf-8", "surrogatepass")
    reason = (s.reason or "").encode("utf-8", "surrogatepass")[:255]
    flags = ((_ALIASES if s.aliases is not None else 0)
             | (_COMBOS if s.combos is not None and s.atoms is not None else 0)
             | (_DEPTH if s.min_depth is not None and s.max_depth is not None else 0)
             | (_SINCE if s.since is not None else 0))
    head = _TEMPLATE.pack(
        len(name), flags, min(s.fetched, _U32), min(s.sampled, _U32),
        s.min_depth if flags & _DEPTH else 0, s.max_depth if flags & _DEPTH else 0,
        s.hour, min(s.this_hour, _U32), min(s.last_hour, _U32),
        s.since if s.since is not None else 0.0, len(reason))
    parts = [head, name, reason, s.admitted.registers(), s.discovered.registers(),
             s.contents.registers()]
    if s.aliases is not None:
        parts.append(s.aliases.registers())
    if flags & _COMBOS:
        assert s.combos is not None and s.atoms is not None
        parts += [s.combos.registers(), s.atoms.registers()]
    return b"".join(parts)


def encode_host(day: int, day_admitted: int, templates: list[tuple[str, TemplateStats]]
                ) -> bytes:
    """One host's state as a blob (templates in the order given, oldest use first)."""
    body = [_HEAD.pack(_VERSION, day, min(day_admitted, _U32), len(templates))]
    body += [_pack_template(name, stats) for name, stats in templates]
    return zlib.compress(b"".join(body), 6)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise ValueError("trap statistics blob is truncated")
        chunk = self.data[self.at:self.at + n]
        self.at += n
        return chunk

    def counter(self) -> DistinctCounter:
        return DistinctCounter.from_registers(self.take(_REGISTERS))


def decode_host(blob: bytes) -> HostState:
    """Back from :func:`encode_host`; ValueError for anything else (never trusts sizes)."""
    try:
        inflate = zlib.decompressobj()
        data = inflate.decompress(blob, _MAX_BLOB)
    except zlib.error as exc:
        raise ValueError(f"trap statistics blob: {exc}") from None
    if inflate.unconsumed_tail:
        raise ValueError("trap statistics blob is too large")
    reader = _Reader(data)
    version, day, day_admitted, count = _HEAD.unpack(reader.take(_HEAD.size))
    if version != _VERSION:
        raise ValueError(f"trap statistics blob of version {version}, not {_VERSION}")
    templates = []
    for _ in range(count):
        (name_len, flags, fetched, sampled, low, high, hour, this_hour, last_hour, since,
         reason_len) = _TEMPLATE.unpack(reader.take(_TEMPLATE.size))
        name = reader.take(name_len).decode("utf-8", "surrogatepass")
        reason = reader.take(reason_len).decode("utf-8", "replace")
        stats = TemplateStats(admitted=reader.counter(), discovered=reader.counter(),
                              contents=reader.counter(), fetched=fetched, sampled=sampled,
                              hour=hour, this_hour=this_hour, last_hour=last_hour)
        if flags & _ALIASES:
            stats.aliases = reader.counter()
        if flags & _COMBOS:
            stats.combos, stats.atoms = reader.counter(), reader.counter()
        if flags & _DEPTH:
            stats.min_depth, stats.max_depth = low, high
        if flags & _SINCE:
            if not math.isfinite(since):
                raise ValueError("trap statistics blob: throttle time is not finite")
            stats.since, stats.reason = since, reason or "restored"
        templates.append((name, stats))
    if reader.at != len(data):
        raise ValueError("trap statistics blob has trailing bytes")
    return day, day_admitted, templates


def _union(mine: DistinctCounter | None, theirs: DistinctCounter | None
           ) -> DistinctCounter | None:
    if theirs is None:
        return mine
    if mine is None:
        return DistinctCounter.from_registers(theirs.registers())
    mine.merge(theirs)
    return mine


def merge_stats(mine: TemplateStats, theirs: TemplateStats) -> None:
    """Make ``mine`` the union of both (see the module docstring)."""
    mine.admitted.merge(theirs.admitted)
    mine.discovered.merge(theirs.discovered)
    mine.contents.merge(theirs.contents)
    mine.aliases = _union(mine.aliases, theirs.aliases)
    if theirs.combos is not None and theirs.atoms is not None:
        mine.combos, mine.atoms = _union(mine.combos, theirs.combos), _union(
            mine.atoms, theirs.atoms)
    mine.fetched = max(mine.fetched, theirs.fetched)
    mine.sampled = max(mine.sampled, theirs.sampled)
    if theirs.min_depth is not None and theirs.max_depth is not None:
        mine.min_depth = theirs.min_depth if mine.min_depth is None else min(
            mine.min_depth, theirs.min_depth)
        mine.max_depth = theirs.max_depth if mine.max_depth is None else max(
            mine.max_depth, theirs.max_depth)
    if theirs.hour > mine.hour:
        mine.hour, mine.this_hour, mine.last_hour = (theirs.hour, theirs.this_hour,
                                                     theirs.last_hour)
    elif theirs.hour == mine.hour:
        mine.this_hour = max(mine.this_hour, theirs.this_hour)
        mine.last_hour = max(mine.last_hour, theirs.last_hour)
    if theirs.since is not None and (mine.since is None or theirs.since < mine.since):
        mine.since, mine.reason = theirs.since, theirs.reason


class ShardedTemplateTracker(TemplateTracker):
    """A :class:`TemplateTracker` whose per-host state is kept in the store beyond its
    working set.

    Besides the working set (``rules.max_hosts`` hosts) it keeps, until the keeper
    (``cluster/shard_state.py``) has written them to the store, the hosts pushed out of
    it while changed since their last save: at most ``leaving_limit`` of them
    (``max_hosts // 4``, at least 1; beyond that the oldest is forgotten and counted in
    ``leaving_dropped``). A host that left and is met again takes back its waiting state,
    or is loaded from the store (:meth:`adopt`) before a page of it is processed. A host
    created here (by a link or a fetch) rather than by :meth:`adopt` is *unmerged*: the
    store may hold state of it that memory lacks, so it is merged in before the host is
    saved (:meth:`merge_into`), and a save never replaces more than it knows.
    """

    def __init__(self, rules: TrapRules | None = None, clock: Clock | None = None) -> None:
        super().__init__(rules, clock)
        self._dirty: set[str] = set()
        #: hosts that left the working set while changed, oldest first, until saved
        self._leaving: OrderedDict[str, _Host] = OrderedDict()
        self.leaving_limit = max(1, self.rules.max_hosts // 4)
        #: hosts that left the working set changed and were forgotten unsaved (the limit)
        self.leaving_dropped = 0
        #: hosts (in the working set or leaving) not merged with the store's copy yet
        self._unmerged: set[str] = set()

    def _host(self, host_key: str) -> _Host:
        self._dirty.add(host_key)  # every caller of _host changes the host's counters
        return super()._host(host_key)

    def _new_host(self, host_key: str) -> _Host:
        host = self._leaving.pop(host_key, None)
        if host is not None:  # back before it was saved: changed still
            self._dirty.add(host_key)
            return host
        self._unmerged.add(host_key)
        return _Host()

    def _evicted(self, host_key: str, host: _Host) -> None:
        if host_key not in self._dirty:  # the store holds all of it (or nothing to keep)
            self._unmerged.discard(host_key)
            return
        self._dirty.discard(host_key)
        leaving = self._leaving
        leaving[host_key] = host
        if len(leaving) > self.leaving_limit:
            dropped, _ = leaving.popitem(last=False)
            self._unmerged.discard(dropped)
            self.leaving_dropped += 1

    @property
    def leaving(self) -> int:
        """Hosts that left the working set changed and wait to be saved."""
        return len(self._leaving)

    def take_dirty(self, wanted: Callable[[str], bool]) -> list[str]:
        """Hosts changed since they were last taken for which ``wanted`` is true (they are
        no longer dirty); the others stay dirty."""
        taken = sorted(k for k in self._dirty if wanted(k))
        self._dirty.difference_update(taken)
        return taken

    def take_changed(self, wanted: Callable[[str], bool], resident: bool = True
                     ) -> list[tuple[str, _Host]]:
        """The changed hosts ``wanted`` selects, leaving the working set and (``resident``)
        in it, with the state object of each (the caller saves them; they are no longer
        changed). Leaving hosts not wanted stay."""
        taken = [(k, self._hosts[k]) for k in self.take_dirty(wanted) if k in self._hosts
                 ] if resident else []
        going = [k for k in self._leaving if wanted(k)]
        taken += [(k, self._leaving.pop(k)) for k in going]
        return taken

    def drop_leaving(self, unwanted: Callable[[str], bool]) -> int:
        """Forget leaving hosts another process saves (shards not held); returns how many."""
        gone = [k for k in self._leaving if unwanted(k)]
        for key in gone:
            del self._leaving[key]
            self._unmerged.discard(key)
        return len(gone)

    def give_back(self, taken: Iterable[tuple[str, _Host]]) -> None:
        """Hosts whose save failed: changed again (leaving ones wait again, up to the limit)."""
        for key, host in taken:
            if self._hosts.get(key) is host:
                self._dirty.add(key)
            elif key not in self._hosts and key not in self._leaving:
                self._dirty.add(key)
                self._evicted(key, host)

    def mark_dirty(self, host_keys: Iterable[str]) -> None:
        """Hosts whose save failed: taken again by the next ``take_dirty``."""
        self._dirty.update(k for k in host_keys if k in self._hosts)

    def unmerged(self, host_keys: Iterable[str]) -> list[str]:
        """Those of ``host_keys`` whose store copy is not merged in yet."""
        return [k for k in host_keys if k in self._unmerged]

    def merge_into(self, host_key: str, host: _Host, blob: bytes | None) -> None:
        """Merge the store's copy (``blob``; None: it has none) into ``host``, the state
        object of ``host_key`` taken for a save; the host is merged from then on, unless
        another object has replaced it meanwhile. ValueError for a blob
        :func:`decode_host` refuses (nothing is changed)."""
        if blob is not None:
            self._merge(host, decode_host(blob))
        if self._hosts.get(host_key, self._leaving.get(host_key, host)) is host:
            self._unmerged.discard(host_key)

    def nothing_stored(self, host_key: str) -> None:
        """The store holds no state of the host: what memory holds of it is all there is."""
        self._unmerged.discard(host_key)

    def is_ready(self, host_key: str) -> bool:
        """The host's state is in memory and merged with the store's copy (no load needed
        before a page of it is processed)."""
        return (host_key in self._hosts or host_key in self._leaving) \
            and host_key not in self._unmerged

    def export_host(self, host_key: str) -> bytes | None:
        """The host's state as a blob, or None when it is not tracked (evicted or never seen)."""
        host = self._hosts.get(host_key)
        if host is None:
            return None
        return export(host)

    def restore_host(self, host_key: str, blob: bytes) -> int:
        """Merge a saved blob into the host's state: :meth:`adopt` of a blob."""
        return self.adopt(host_key, blob)

    def adopt(self, host_key: str, blob: bytes | None) -> int:
        """Bring the host into the working set merged with the store's copy (``blob``;
        None: the store has none); returns how many templates the copy held. A restore is
        no change to save again. Raises ValueError for a blob :func:`decode_host` refuses
        (nothing is changed)."""
        state = decode_host(blob) if blob is not None else None
        host = super()._host(host_key)  # not through ours: no change to save
        if state is not None:
            self._merge(host, state)
        self._unmerged.discard(host_key)
        return 0 if state is None else len(state[2])

    def _merge(self, host: _Host, state: HostState) -> None:
        day, day_admitted, templates = state
        now = self._clock.now()
        if day > host.day:
            host.day, host.day_admitted = day, day_admitted
        elif day == host.day:
            host.day_admitted = max(host.day_admitted, day_admitted)
        for name, theirs in templates:
            mine = self._template(host, name)
            merge_stats(mine, theirs)
            self._check(mine, now)

    def forget_hosts(self, host_keys: list[str]) -> None:
        """Drop the state of hosts handed over (their new owner has it from the store)."""
        for key in host_keys:
            self._hosts.pop(key, None)
            self._leaving.pop(key, None)
            self._dirty.discard(key)
            self._unmerged.discard(key)


def export(host: _Host) -> bytes:
    """One host's state object as a blob (:func:`encode_host`)."""
    return encode_host(host.day, host.day_admitted, list(host.templates.items()))
