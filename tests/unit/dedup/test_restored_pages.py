"""The index of pages read back from the store (dedup/pages.with_pages, SimHashIndex.arrays)."""

from __future__ import annotations

import random

from courtier.dedup.pages import DuplicateTracker, id_hex, item_id, with_pages
from courtier.dedup.simhash_index import SimHashIndex


def test_with_pages_keeps_the_base_adds_the_pages_and_leaves_the_base_alone() -> None:
    rng = random.Random(3)
    base = SimHashIndex(3)
    old = [(rng.randbytes(16), rng.getrandbits(64)) for _ in range(5000)]
    for key, fp in old[:4000]:
        base.add(fp, item_id(key))  # part of it still in the pending buffer
    base.add_many([fp for _, fp in old[4000:]], [item_id(k) for k, _ in old[4000:]])
    fps, _ = base.arrays()
    assert sorted(fps.tolist()) == sorted(fp for _, fp in old)
    new_pages = [(rng.randbytes(16), rng.getrandbits(64)) for _ in range(300)]
    merged = with_pages(base, new_pages, limit=10_000)
    assert len(base) == 5000 and len(merged) == 5300
    for key, fp in old[::97] + new_pages[::7]:
        assert (item_id(key), 0) in merged.near(fp)
    assert all(base.near(fp) == [] or base.near(fp)[0][0] != item_id(k) for k, fp in new_pages)


def test_with_pages_keeps_the_newest_up_to_the_limit() -> None:
    rng = random.Random(4)
    pages = [(rng.randbytes(16), rng.getrandbits(64)) for _ in range(10)]
    merged = with_pages(with_pages(SimHashIndex(3), pages[:6], 8), pages[6:], 8)
    assert len(merged) == 8
    for key, fp in pages[:2]:  # the oldest two went
        assert (item_id(key), 0) not in merged.near(fp)
    for key, fp in pages[2:]:
        assert (item_id(key), 0) in merged.near(fp)


def test_a_restored_page_is_found_as_a_twin_but_never_as_its_own() -> None:
    text = " ".join(f"w{i} the quiet river bends past the old mill" for i in range(30))
    dups = DuplicateTracker()
    fp, _ = DuplicateTracker().fingerprint(b"\x01" * 16, text)
    dups.restored = with_pages(dups.restored, [(b"\x01" * 16, fp)], 100)
    assert dups.fingerprint(b"\x01" * 16, text)[1] is None  # the same URL fetched again
    _, twin = dups.fingerprint(b"\x02" * 16, text.replace("w7 ", "x7 "))
    assert twin == id_hex(item_id(b"\x01" * 16))
