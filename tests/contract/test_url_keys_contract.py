"""Contract: ``Store.url_keys`` — the stream a shard's new owner loads its known URL keys
from (crawl/known_loader.py) — against every store: key order, the bound, the shards
asked only, keys with NUL bytes, and a paged read that returns every key exactly once."""

from __future__ import annotations

from dataclasses import replace

from courtier.crawl.known_loader import KnownUrlsLoader
from courtier.dedup.known_urls import KnownUrls
from courtier.store.base import Store
from tests.contract.test_store_contract import key, new


def _split(blob: bytes) -> list[bytes]:
    assert len(blob) % 16 == 0
    return [blob[i:i + 16] for i in range(0, len(blob), 16)]


async def test_url_keys_in_key_order_bounded_to_the_shards_asked(store: Store) -> None:
    rows = [new(f"http://h{s}.test/{i}", shard=s) for s in (2, 5, 9) for i in range(7)]
    await store.add_urls(rows)
    want = sorted(r.url_key for r in rows if r.shard in (2, 9))
    assert _split(await store.url_keys([9, 2], b"", 100)) == want
    assert _split(await store.url_keys([2, 9], b"", 3)) == want[:3]
    # from a key on: strictly above it, across the shard boundary
    assert _split(await store.url_keys([2, 9], want[5], 4)) == want[6:10]
    assert await store.url_keys([2, 9], want[-1], 10) == b""
    assert await store.url_keys([3], b"", 10) == b""
    assert await store.url_keys([], b"", 10) == b""
    assert await store.url_keys([2], b"", 0) == b""


async def test_keys_with_nul_bytes_come_back_whole(store: Store) -> None:
    """A key ending in NUL bytes (bytea and BLOB keep them; a text path would not)."""
    base = key("http://a.test/x", 4)
    odd = [base[:12] + b"\0\0\0\0", base[:8] + b"\0" * 7 + b"\1", base[:15] + b"\0"]
    first = new("http://a.test/x", shard=4)
    rows = [first] + [replace(first, url_key=k, url=f"http://a.test/{n}")
                      for n, k in enumerate(odd)]
    await store.add_urls(rows)
    assert _split(await store.url_keys([4], b"", 10)) == sorted({base, *odd})


async def test_a_paged_load_holds_every_key_once(store: Store) -> None:
    """The loader over a real store, 5 keys a read: every shard complete with exactly its
    keys (and nothing of a shard it was not asked for)."""
    rows = [new(f"http://h{s}.test/{i}", shard=s) for s in (1, 3, 4, 8) for i in range(6)]
    await store.add_urls(rows)
    known = KnownUrls()
    loader = KnownUrlsLoader(store, known, keys_per_read=5, keys_per_turn=7)
    loader.gained([1, 4, 8, 11])
    done: set[int] = set()
    for _ in range(20):
        done |= await loader.step()
        if not loader.loading:
            break
    assert done == {1, 4, 8, 11}
    assert known.complete_shards() == [1, 4, 8, 11]
    assert len(known) == 18
    for r in rows:
        assert known.knows(r.url_key, r.shard) is (True if r.shard != 3 else None)
    assert known.knows(key("http://h1.test/new", 1), 1) is False
