"""Trap template statistics that follow a host's shard from one worker to the next.

A :class:`~courtier.frontier.traps.TemplateTracker` lives in one worker's memory.
With many workers a host's shard moves (a handover, a crash); without its
statistics the new owner would give a known trap a fresh allowance
(``template_min_urls + sample_budget`` URLs) after every move. So the owner saves
each host's statistics in the store (``Store.save_trap_stats``: on handover and
every few seconds) and the next owner merges them in when it registers the host,
before any request to it (``worker_shards.py``).

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
from collections.abc import Callable, Iterable

from courtier.core.clock import Clock
from courtier.frontier.templates import DistinctCounter, TemplateStats
from courtier.frontier.traps import TemplateTracker, TrapRules, _Host

__all__ = ["ShardedTemplateTracker", "decode_host", "encode_host", "merge_stats"]

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
    """A :class:`TemplateTracker` whose per-host state can be saved and restored."""

    def __init__(self, rules: TrapRules | None = None, clock: Clock | None = None) -> None:
        super().__init__(rules, clock)
        self._dirty: set[str] = set()

    def _host(self, host_key: str) -> _Host:
        dirty = self._dirty  # every caller of _host changes the host's counters
        dirty.add(host_key)
        if len(dirty) > 2 * self.rules.max_hosts:  # evicted hosts: nothing to save
            dirty.intersection_update(self._hosts)
        return super()._host(host_key)

    def take_dirty(self, wanted: Callable[[str], bool]) -> list[str]:
        """Hosts changed since they were last taken for which ``wanted`` is true (they are
        no longer dirty); the others stay dirty."""
        taken = sorted(k for k in self._dirty if wanted(k))
        self._dirty.difference_update(taken)
        return taken

    def mark_dirty(self, host_keys: Iterable[str]) -> None:
        """Hosts whose save failed: taken again by the next ``take_dirty``."""
        self._dirty.update(host_keys)

    def export_host(self, host_key: str) -> bytes | None:
        """The host's state as a blob, or None when it is not tracked (evicted or never seen)."""
        host = self._hosts.get(host_key)
        if host is None:
            return None
        return encode_host(host.day, host.day_admitted, list(host.templates.items()))

    def restore_host(self, host_key: str, blob: bytes) -> int:
        """Merge a saved blob into the host's state; returns how many templates it held.
        Raises ValueError for a blob :func:`decode_host` refuses (nothing is changed)."""
        day, day_admitted, templates = decode_host(blob)
        now = self._clock.now()
        host = super()._host(host_key)  # a restore is no change to save again
        if day > host.day:
            host.day, host.day_admitted = day, day_admitted
        elif day == host.day:
            host.day_admitted = max(host.day_admitted, day_admitted)
        for name, theirs in templates:
            mine = self._template(host, name)
            merge_stats(mine, theirs)
            self._check(mine, now)
        return len(templates)

    def forget_hosts(self, host_keys: list[str]) -> None:
        """Drop the state of hosts handed over (their new owner has it from the store)."""
        for key in host_keys:
            self._hosts.pop(key, None)
            self._dirty.discard(key)
