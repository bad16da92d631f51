"""Trap statistics saved by one owner and restored by the next (frontier/trap_state.py)."""

from __future__ import annotations

import random
import zlib

import pytest

from courtier.core.clock import VirtualClock
from courtier.core.urls import canonicalize
from courtier.frontier.templates import DistinctCounter
from courtier.frontier.trap_state import ShardedTemplateTracker, decode_host, encode_host
from courtier.frontier.traps import TrapRules

HOST = "http://trap.test"
RULES = TrapRules(template_min_urls=20, sample_budget=5, sample_rate=0.5)


def trap_urls(seed: int, n: int) -> list[str]:
    """Session-id aliases of three pages: the ``session ids`` rule throttles them."""
    rng = random.Random(seed)
    return [f"{HOST}/item/{i % 3}?sid={rng.getrandbits(64):x}" for i in range(n)]


def offer(tracker: ShardedTemplateTracker, urls: list[str], depth: int = 1) -> int:
    """How many of ``urls`` the tracker lets into the store."""
    admitted = 0
    for raw in urls:
        url = canonicalize(raw)
        admitted += tracker.admit(url.host_key, url, depth).admitted
    return admitted


def host_key() -> str:
    return canonicalize(HOST + "/").host_key


def test_a_restored_trap_keeps_its_throttle_and_sample_budget() -> None:
    clock = VirtualClock()
    old = ShardedTemplateTracker(RULES, clock)
    first = offer(old, trap_urls(1, 400))
    blob = old.export_host(host_key())
    assert blob is not None
    new = ShardedTemplateTracker(RULES, clock)
    assert new.restore_host(host_key(), blob) == 1
    second = offer(new, trap_urls(2, 400))
    allowance = RULES.template_min_urls + RULES.sample_budget
    # across the move the trap gets one owner's allowance, not two
    assert first + second <= allowance + 2, (first, second)
    [report] = new.throttled(host_key())
    assert report.reason == "session ids" and report.sampled == RULES.sample_budget
    assert report.since == old.throttled(host_key())[0].since
    # the same move without the saved statistics: a fresh allowance
    fresh = offer(ShardedTemplateTracker(RULES, clock), trap_urls(2, 400))
    assert fresh >= RULES.template_min_urls


def test_round_trip_keeps_every_figure_and_restoring_twice_changes_nothing() -> None:
    clock = VirtualClock()
    tracker = ShardedTemplateTracker(TrapRules(template_min_urls=5), clock)
    key = host_key()
    for i in range(30):
        url = canonicalize(f"{HOST}/shop?color=c{i % 7}&size=s{i % 5}&page={i}")
        tracker.admit(key, url, depth=i % 9)
        tracker.observe_fetched(key, tracker.template_of(url), f"digest{i % 4}")
    offer(tracker, [f"{HOST}/cal/{2000 + i}/01" for i in range(12)], depth=3)
    blob = tracker.export_host(key)
    assert blob is not None
    copy = ShardedTemplateTracker(TrapRules(template_min_urls=5), clock)
    copy.restore_host(key, blob)
    assert copy.templates(key) == tracker.templates(key)
    copy.restore_host(key, blob)  # a union: idempotent
    assert copy.templates(key) == tracker.templates(key)
    _, _, templates = decode_host(blob)
    assert [name for name, _ in templates] == [r.template for r in tracker.templates(key)]


def test_restore_merges_with_what_the_new_owner_already_counted() -> None:
    clock = VirtualClock()
    old, new = ShardedTemplateTracker(RULES, clock), ShardedTemplateTracker(RULES, clock)
    offer(old, trap_urls(1, 12))
    offer(new, trap_urls(2, 6))  # links to the host found on other hosts' pages
    blob = old.export_host(host_key())
    assert blob is not None
    new.restore_host(host_key(), blob)
    [merged] = new.templates(host_key())
    assert 16 <= merged.admitted <= 20  # the union of 12 and 6 distinct URLs


def test_dirty_hosts_are_taken_once_and_a_restore_is_not_a_change() -> None:
    tracker = ShardedTemplateTracker(RULES, VirtualClock())
    offer(tracker, [*trap_urls(1, 3), "http://other.test/a"])
    other = canonicalize("http://other.test/").host_key
    assert tracker.take_dirty(lambda k: k == host_key()) == [host_key()]
    assert tracker.take_dirty(lambda k: True) == [other]
    assert tracker.take_dirty(lambda k: True) == []
    blob = tracker.export_host(host_key())
    assert blob is not None
    tracker.restore_host("copy.test", blob)
    assert tracker.take_dirty(lambda k: True) == []
    tracker.mark_dirty(["copy.test"])
    assert tracker.take_dirty(lambda k: True) == ["copy.test"]
    tracker.forget_hosts([host_key(), "copy.test"])
    assert tracker.hosts() == [other] and tracker.export_host(host_key()) is None


@pytest.mark.parametrize("blob", [
    b"", b"not zlib", zlib.compress(b"\x07" + bytes(20)),  # unknown version
    zlib.compress(b"\x01" + bytes(14) + b"\x01\x00"),  # a template promised, none there
])
def test_blobs_it_cannot_read_are_refused_and_change_nothing(blob: bytes) -> None:
    tracker = ShardedTemplateTracker(RULES, VirtualClock())
    with pytest.raises(ValueError):
        tracker.restore_host(host_key(), blob)
    assert tracker.hosts() == []


def test_a_truncated_blob_is_refused() -> None:
    tracker = ShardedTemplateTracker(RULES, VirtualClock())
    offer(tracker, trap_urls(1, 30))
    blob = tracker.export_host(host_key())
    assert blob is not None
    cut = zlib.compress(zlib.decompress(blob)[:-10])
    with pytest.raises(ValueError):
        decode_host(cut)
    assert decode_host(encode_host(3, 4, [])) == (3, 4, [])


def test_counter_registers_round_trip_and_merge_counts_the_union() -> None:
    rng = random.Random(5)
    values = [rng.getrandbits(64) for _ in range(3000)]
    left, right, both = DistinctCounter(), DistinctCounter(), DistinctCounter()
    for v in values[:2000]:
        left.add(v)
    for v in values[1000:]:
        right.add(v)
    for v in values:
        both.add(v)
    copy = DistinctCounter.from_registers(left.registers())
    assert copy.count() == left.count() and copy.registers() == left.registers()
    left.merge(right)
    assert left.registers() == both.registers() and left.count() == both.count()
    with pytest.raises(ValueError):
        DistinctCounter.from_registers(bytes(255))
    with pytest.raises(ValueError):
        DistinctCounter.from_registers(bytes([60]) * 256)


def others(n: int) -> list[str]:
    """One link to each of ``n`` other hosts (a broad crawl's spread)."""
    return [f"http://other{i}.test/a" for i in range(n)]


def test_a_changed_host_leaving_the_working_set_waits_whole_until_saved() -> None:
    rules = TrapRules(template_min_urls=20, sample_budget=5, sample_rate=0.5, max_hosts=4)
    tracker = ShardedTemplateTracker(rules, VirtualClock())
    first = offer(tracker, trap_urls(1, 300))
    assert tracker.throttled(host_key())
    offer(tracker, others(rules.max_hosts))  # the trap is the least recently used
    assert host_key() not in tracker.hosts() and tracker.leaving == 1
    assert tracker.is_ready(host_key()) is False  # created here: never merged with the store
    # met again before the keeper saved it: its state comes back, throttle and budget
    second = offer(tracker, trap_urls(2, 300))
    assert first + second <= rules.template_min_urls + rules.sample_budget + 2, (first, second)
    assert host_key() in tracker.hosts() and tracker.throttled(host_key())
    assert tracker.leaving == 1  # the host it pushed out in turn


def test_hosts_waiting_to_be_saved_are_bounded_and_unchanged_ones_do_not_wait() -> None:
    rules = TrapRules(max_hosts=8)
    tracker = ShardedTemplateTracker(rules, VirtualClock())
    assert tracker.leaving_limit == 2
    for i in range(rules.max_hosts + 5):  # restored, never changed: the store has them
        tracker.adopt(f"kept{i}.test", None)
    assert tracker.leaving == 0 and len(tracker.hosts()) == rules.max_hosts
    offer(tracker, others(3 * rules.max_hosts))  # changed ones push each other out
    assert len(tracker.hosts()) == rules.max_hosts and tracker.leaving == tracker.leaving_limit
    assert tracker.leaving_dropped == 2 * rules.max_hosts - tracker.leaving_limit
    taken = tracker.take_changed(lambda key: True, resident=False)
    assert [k for k, _ in taken] == [canonicalize(u).host_key
                                     for u in others(3 * rules.max_hosts)[-10:-8]]
    assert tracker.leaving == 0
    tracker.give_back(taken)  # a failed save: they wait again
    assert tracker.leaving == 2
