"""The owner-local known-key set (dedup/known_urls.py): exact, per shard, never claiming
a key it was not given, merged without losing keys, bounded by its cap."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtier.core.urls import SHARD_COUNT, shard_of_key
from courtier.crawl.known_loader import split_by_shard
from courtier.dedup.known_urls import MERGE_MIN, KnownUrls, keys_array

BITS = SHARD_COUNT.bit_length() - 1


def key_of(shard: int, tail: bytes) -> bytes:
    """A 16-byte key of ``shard`` (its leading bits) ending with ``tail``."""
    head = (shard << (32 - BITS)).to_bytes(4, "big")
    made = (head + bytes(12 - len(tail)) + tail)[:16] if len(tail) <= 12 else head + tail[:12]
    assert shard_of_key(made) == shard
    return made


def loaded(known: KnownUrls, shard: int, keys: list[bytes]) -> None:
    assert known.start(shard)
    known.loaded_part(shard, keys_array(b"".join(sorted(keys))))
    known.finish(shard)


def test_answers_only_for_complete_shards() -> None:
    known = KnownUrls()
    a, b = key_of(3, b"a"), key_of(3, b"b")
    assert known.knows(a, 3) is None  # not held
    assert known.start(3)
    known.loaded_part(3, keys_array(a))
    assert known.knows(a, 3) is None  # still loading: not decided here
    known.finish(3)
    assert known.knows(a, 3) is True
    assert known.knows(b, 3) is False
    known.drop([3])
    assert known.knows(a, 3) is None and len(known) == 0


def test_keys_added_while_loading_are_kept_and_keys_of_other_shards_ignored() -> None:
    known = KnownUrls()
    known.start(5)
    early, late, other = key_of(5, b"\x01"), key_of(5, b"\x09"), key_of(6, b"\x01")
    known.add([late, other])  # committed during the load, after the read passed it
    known.loaded_part(5, keys_array(early))
    known.finish(5)
    assert known.knows(early, 5) and known.knows(late, 5)
    assert known.knows(other, 6) is None
    assert len(known) == 2


def test_trailing_and_embedded_nul_bytes_are_exact() -> None:
    """numpy gives S16 items back without trailing NULs: the lookup compares stripped to
    stripped. Broken on a scratch copy (``probe = key``, no strip): a loaded key ending
    in NUL answered False (``assert False is True``)."""
    ends = [b"\x00", b"\x00\x00\x01", b"\x01\x00", b"\x00\x01\x00\x00", b"\xff\x00"]
    keys = [key_of(7, e) for e in ends]
    known = KnownUrls()
    loaded(known, 7, keys[:3])
    for k in keys[:3]:
        assert known.knows(k, 7) is True
    for k in keys[3:]:
        assert known.knows(k, 7) is False
    known.add(keys[3:])
    assert all(known.knows(k, 7) for k in keys)


def test_merges_keep_every_key_and_no_other() -> None:
    known = KnownUrls()
    base = sorted({key_of(9, os.urandom(12)) for _ in range(1000)})
    loaded(known, 9, base[::2])
    added = base[1::2]
    for i in range(0, len(added), 7):  # many small adds: several merges into the array
        known.add(added[i:i + 7])
    assert len(known) == len(base)
    assert all(known.knows(k, 9) for k in base)
    absent = [key_of(9, os.urandom(12)) for _ in range(200)]
    assert not any(known.knows(k, 9) for k in absent if k not in set(base))
    assert known.nbytes() >= 16 * (len(base) - MERGE_MIN)


def test_the_cap_refuses_shards_past_it() -> None:
    known = KnownUrls(cap=5)
    loaded(known, 1, [key_of(1, bytes([i])) for i in range(4)])
    assert known.start(2)
    assert not known.loaded_part(2, keys_array(b"".join(key_of(2, bytes([i]))
                                                        for i in range(3))))
    assert 2 in known.refused and known.knows(key_of(2, b"\x00"), 2) is None
    known.add([key_of(1, b"\x10")])
    assert not known.start(3)  # the cap is reached: refused at once
    assert known.complete_shards() == [1]


def test_split_by_shard_cuts_sorted_keys_into_runs() -> None:
    keys = sorted(key_of(s, os.urandom(12)) for s in (0, 0, 4, 1023, 1023, 1023))
    runs = split_by_shard(keys_array(b"".join(keys)))
    assert {s: len(r) for s, r in runs.items()} == {0: 2, 4: 1, 1023: 3}
    assert split_by_shard(keys_array(b"")) == {}


def test_a_bad_blob_is_refused() -> None:
    with pytest.raises(ValueError, match="whole number"):
        keys_array(b"x" * 17)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(
    st.sampled_from(["load", "add", "drop", "ask"]),
    st.integers(0, 3),
    st.lists(st.binary(min_size=1, max_size=3), max_size=12)), max_size=40))
def test_never_claims_a_key_it_was_not_given(ops: list[tuple[str, int, list[bytes]]]) -> None:
    """Against a model: the durable keys of each shard (what a store would hold). A
    complete shard answers True exactly for the durable keys it was loaded with or given
    since its load began; it never answers True for any other key."""
    known = KnownUrls()
    durable: dict[int, set[bytes]] = {s: set() for s in range(4)}
    seen_by: dict[int, set[bytes]] = {}  # what the set was told while holding the shard
    for op, shard, tails in ops:
        keys = [key_of(shard, t) for t in tails]
        if op == "load":
            durable[shard] |= set(keys[: len(keys) // 2])  # written by anyone before
            loaded(known, shard, sorted(durable[shard]))
            seen_by[shard] = set(durable[shard])
        elif op == "add":
            durable[shard] |= set(keys)
            known.add(keys)
            if shard in seen_by:
                seen_by[shard] |= set(keys)
        elif op == "drop":
            known.drop([shard])
            seen_by.pop(shard, None)
        for s in range(4):
            for k in [key_of(s, t) for t in tails] + sorted(durable[s]):
                verdict = known.knows(k, s)
                if s not in seen_by:
                    assert verdict is None
                else:
                    assert verdict is (k in seen_by[s])
                    assert not verdict or k in durable[s]


def test_keys_handed_in_are_pending_until_their_batch_ends() -> None:
    """Pending is never known; a batch's end clears what was handed in before it began
    (acknowledged keys became known first), not what came after."""
    known = KnownUrls()
    loaded(known, 2, [])
    early, late = key_of(2, b"\x01"), key_of(2, b"\x02")
    known.offer([early])
    generation = known.batch_started()  # takes ``early``
    known.offer([late])                  # handed in during the commit: the next batch
    assert known.is_pending(early) and known.knows(early, 2) is False
    known.batch_ended(generation)        # given up: ``early`` is written again next time
    assert not known.is_pending(early) and known.is_pending(late)
    generation = known.batch_started()
    known.add([late])                    # acknowledged
    known.batch_ended(generation)
    assert not known.is_pending(late) and known.knows(late, 2) is True
